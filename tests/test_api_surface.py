"""lpmpi's collective functions against the one list of collectives (``lpmpi.engine.COLLECTIVES``
and each one's row, ``engine.collective_info``): every collective C has C, iC and C_init in
lpmpi, in ``lpmpi.__all__``, in the stubs (lpmpi/__init__.pyi) and in docs/api.md, with the
parameters its row implies; and no other public name looks like a collective function.

The stubs' parameters and defaults against the runtime's, for every public function:
test_faults.py::test_stub_signatures_match_the_runtime."""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import lpmpi
from lpmpi import engine

ROOT = Path(__file__).resolve().parent.parent
STUB = Path(lpmpi.__file__).with_suffix(".pyi")
API = ROOT / "docs" / "api.md"


def forms(coll: str) -> tuple[str, str, str]:
    """The public functions of a collective: blocking, nonblocking, persistent."""
    return coll, f"i{coll}", f"{coll}_init"


def stub_functions() -> dict[str, ast.FunctionDef]:
    """The module-level functions of lpmpi/__init__.pyi, by name."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"), str(STUB))
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def api_text() -> str:
    return API.read_text(encoding="utf-8")


def doc_signatures(text: str) -> dict[str, ast.arguments]:
    """``name(params)`` at the start of a line of docs/api.md's ```text blocks, parsed, where
    the parameters are written out (not ``...``)."""
    out = {}
    for block in re.findall(r"^```text\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        for name, params in re.findall(r"^(\w+)\(([^()]*)\)", block, flags=re.MULTILINE):
            if params.strip() != "...":
                fn = ast.parse(f"def _({params}): pass").body[0]
                assert isinstance(fn, ast.FunctionDef)
                out[name] = fn.args
    return out


def expected_params(coll: str) -> tuple[list[str], list[str]]:
    """(positional-or-keyword, keyword-only) parameter names of the three functions of ``coll``,
    from the engine's row (the order of ``Collective.lpmpi_args``)."""
    return engine.collective_info(coll).params()


def names_of(args: ast.arguments) -> tuple[list[str], list[str]]:
    return [a.arg for a in args.posonlyargs + args.args], [a.arg for a in args.kwonlyargs]


def looks_like_a_collective(name: str, params: list[str] | None, public: set[str]) -> bool:
    """A public name that reads as a collective's function, told without the list: its first
    parameter is a buffer (``sendbuf``, ``buf``), or it is a persistent (``*_init``) or
    nonblocking (``i`` + another public name) form; and by the list: it ends with a
    collective's name or is one's nonblocking or persistent form."""
    if params and params[0] in ("sendbuf", "buf"):
        return True
    if name.endswith("_init") or (name.startswith("i") and name[1:] in public):
        return True
    return any(name.endswith(c) or name in (f"i{c}", f"{c}_init") for c in engine.COLLECTIVES)


def test_the_rows_params_rule_by_hand():
    """The row's rule (engine.Collective.params) against the signatures written out by hand."""
    assert expected_params("reduce") == (["sendbuf", "recvbuf", "op", "root", "comm"],
                                         ["algorithm", "chunk_bytes", "acc_dtype"])
    assert expected_params("bcast") == (["buf", "root", "comm"], ["algorithm", "chunk_bytes"])
    assert expected_params("reduce_scatter")[1] == ["algorithm", "chunk_bytes", "acc_dtype", "counts", "compression"]
    assert expected_params("allreduce")[1] == ["algorithm", "chunk_bytes", "acc_dtype", "compression"]
    assert expected_params("allgather")[1] == ["algorithm", "chunk_bytes", "compression"]
    assert expected_params("alltoallv") == (["sendbuf", "sendcounts", "recvbuf", "recvcounts", "comm"],
                                            ["sdispls", "rdispls", "algorithm", "chunk_bytes"])
    assert expected_params("allgatherv") == (["sendbuf", "recvbuf", "counts", "comm"],
                                             ["displs", "algorithm", "chunk_bytes"])
    assert "reduce_scatter_v" in engine.ENGINE_COLLECTIVES and "reduce_scatter_v" not in engine.COLLECTIVES


def test_generated_surface_is_up_to_date():
    """The stubs' and docs/api.md's blocks of the collectives made from their rows are what
    tools/gen_surface.py writes from the engine (run it after adding a collective)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_surface.py"), "--check"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr


def test_the_list_is_the_engines():
    assert len(engine.COLLECTIVES) >= 5 and len(set(engine.COLLECTIVES)) == len(engine.COLLECTIVES)
    assert {"allreduce", "reduce", "bcast", "allgather", "reduce_scatter"} <= set(engine.COLLECTIVES)
    assert [engine.collective_info(c).name for c in engine.COLLECTIVES] == list(engine.COLLECTIVES)


@pytest.mark.parametrize("coll", engine.COLLECTIVES)
def test_each_collective_has_its_three_functions_everywhere(coll):
    stubs, api = stub_functions(), api_text()
    missing = []
    for name in forms(coll):
        if not callable(getattr(lpmpi, name, None)):
            missing.append(f"{name}: not a function of lpmpi")
        if name not in lpmpi.__all__:
            missing.append(f"{name}: not in lpmpi.__all__")
        if name not in stubs:
            missing.append(f"{name}: not declared in {STUB.name}")
        if f"`{name}`" not in api:
            missing.append(f"{name}: not listed (`{name}`) in docs/api.md")
        if not re.search(rf"(?<![\w.]){name}\(", api):
            missing.append(f"{name}: no {name}(...) in docs/api.md")
    assert not missing, "\n".join(missing)


def test_no_other_public_name_looks_like_a_collective():
    known = {f for c in engine.COLLECTIVES for f in forms(c)}
    stubs = stub_functions()
    public = set(lpmpi.__all__) | set(stubs)
    # the rule sees what it should, and passes over the public names that are no collective
    assert looks_like_a_collective("alltoall", ["sendbuf", "recvbuf"], public)
    assert looks_like_a_collective("alltoall_init", None, public)
    assert looks_like_a_collective("ialltoall", None, public | {"alltoall"})
    assert looks_like_a_collective("fused_allreduce", None, public)
    for name in ("waitall", "progress_thread", "select", "explain", "algorithms", "Request", "Op"):
        obj = getattr(lpmpi, name)
        params = list(inspect.signature(obj).parameters) if inspect.isroutine(obj) else None
        assert not looks_like_a_collective(name, params, public), name
    strays = []
    for name in sorted(public):
        obj = getattr(lpmpi, name, None)
        params = list(inspect.signature(obj).parameters) if inspect.isroutine(obj) else None
        if name in stubs and params is None:
            params = names_of(stubs[name].args)[0]
        if looks_like_a_collective(name, params, public) and name not in known:
            strays.append(name)
    assert not strays, (f"public names that look like collective functions of no collective in "
                        f"lpmpi.engine.COLLECTIVES {engine.COLLECTIVES}: {strays}")


@pytest.mark.parametrize("coll", engine.COLLECTIVES)
def test_parameters_follow_the_collectives_row(coll):
    """The runtime's and the stub's parameters of C, iC and C_init are those the engine's row
    implies (the three take the same arguments), and so are docs/api.md's where it writes them
    out (with the runtime's defaults); the blocking one is written out."""
    pos, kw = expected_params(coll)
    stubs, docs = stub_functions(), doc_signatures(api_text())
    assert coll in docs, f"docs/api.md writes out no signature of {coll}"
    sig0 = inspect.signature(getattr(lpmpi, coll))
    for name in forms(coll):
        sig = inspect.signature(getattr(lpmpi, name))
        run = ([p.name for p in sig.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD],
               [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY])
        assert run == (pos, kw) and len(sig.parameters) == len(pos) + len(kw), \
            f"{name}{sig}: the row of {coll} gives {pos} and keyword-only {kw}"
        assert [(p.name, p.kind, p.default) for p in sig.parameters.values()] == \
            [(p.name, p.kind, p.default) for p in sig0.parameters.values()], f"{name}{sig} != {coll}{sig0}"
        if name in stubs:
            assert names_of(stubs[name].args) == (pos, kw), f"{STUB.name}: {name} {names_of(stubs[name].args)}"
        if name in docs:
            a = docs[name]
            assert names_of(a) == (pos, kw), f"docs/api.md: {name} {names_of(a)} != {(pos, kw)}"
            defaults = [ast.literal_eval(d) for d in a.defaults] + \
                [ast.literal_eval(d) for d in a.kw_defaults if d is not None]
            run_defaults = [p.default for p in sig.parameters.values() if p.default is not p.empty]
            assert defaults == run_defaults, f"docs/api.md: {name} defaults {defaults} != {run_defaults}"
