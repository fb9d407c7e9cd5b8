"""The shape of the Python code, read from its source (nothing is imported): the import graph of
lpmpi/ (the tuner, lpmpi/tune/, included) has no cycle, no module outside lpmpi.tune imports it
(Optuna is its dependency alone), and the tuner uses only lpmpi's public names (no private module
such as ``lpmpi._core``, no ``_private`` name of any other lpmpi module)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lpmpi",)
TUNER = "lpmpi.tune"


def modules() -> dict[str, Path]:
    """{dotted module name: source file} of every .py module of the packages."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _absolute(module: str | None, level: int, here: str, is_package: bool) -> str:
    """The absolute name of an ``ImportFrom``'s module (resolving relative imports)."""
    if level == 0:
        return module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import statement of a module,
    those inside functions included (they run too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(node.module, node.level, name, path.name == "__init__.py")
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def extensions() -> set[str]:
    """Compiled modules of the packages (``lpmpi._core`` from _core.pyx): leaves of the graph."""
    return {".".join(p.relative_to(ROOT).with_suffix("").parts)
            for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.pyx")}


def graph() -> dict[str, set[str]]:
    """{module: the modules of the packages it imports}; ``from pkg import sub`` where ``sub``
    is a module (a compiled one included) is an edge to ``pkg.sub``, else to ``pkg``."""
    mods = modules()
    known = set(mods) | extensions()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for mod, names, _ in imports(name, path):
            targets = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in known]
            if len(targets) < len(names) or not names:
                targets.append(mod)
            edges[name] |= {t for t in targets if t in mods and t != name}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_graph_sees_the_imports():
    edges = graph()
    assert "lpmpi.bench.harness" in edges["lpmpi.bench.rows"]
    assert "lpmpi.bench" in edges["lpmpi.tune.measure"] and "lpmpi.engine" in edges["lpmpi.tune.space"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert "lpmpi._core" in extensions() and "lpmpi" not in edges["lpmpi.engine"]


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def tuner_private_uses() -> list[str]:
    """Every place a tuner module reaches into lpmpi's private parts."""
    bad = []
    for name, path in modules().items():
        if not _in_tuner(name):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        lpmpi_names = set()                  # local names bound to lpmpi modules
        for mod, names, line in imports(name, path):
            if not mod.startswith("lpmpi") or _in_tuner(mod):
                continue
            where = f"{path.relative_to(ROOT)}:{line}"
            if any(_private(part) for part in mod.split(".")):
                bad.append(f"{where}: imports the private module {mod}")
            bad += [f"{where}: imports the private name {mod}.{n}" for n in names if _private(n)]
            lpmpi_names |= set(names) if names else {mod.split(".")[0]}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                lpmpi_names |= {a.asname for a in node.names if a.asname and a.name.startswith("lpmpi")}
            if (isinstance(node, ast.Attribute) and _private(node.attr)
                    and isinstance(_root(node), ast.Name) and _root(node).id in lpmpi_names):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: uses the private {ast.unparse(node)}")
    return bad


def _in_tuner(module: str) -> bool:
    return module == TUNER or module.startswith(TUNER + ".")


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def test_tuner_uses_only_public_names_of_lpmpi():
    bad = tuner_private_uses()
    assert not bad, "\n".join(bad)


def test_only_the_command_line_imports_the_tuner():
    """``import lpmpi`` must not import lpmpi.tune (nor Optuna, which only lpmpi.tune imports):
    outside the tuner, the one module that imports it is ``python -m lpmpi``'s, inside a
    function (``python -m lpmpi tune``)."""
    edges = graph()
    users = sorted(m for m, to in edges.items() if not _in_tuner(m) and any(_in_tuner(t) for t in to))
    assert users == ["lpmpi.__main__"], users
    optuna = sorted(name for name, path in modules().items()
                    if any(mod.split(".")[0] == "optuna" for mod, _, _ in imports(name, path)))
    assert optuna and all(_in_tuner(m) for m in optuna), optuna


@pytest.mark.parametrize("module", ["lpmpi.bench.harness", "lpmpi.bench.memory", "lpmpi.bench.verify",
                                    "lpmpi.bench.report", "lpmpi.bench.grid", "lpmpi.bench.scaling",
                                    "lpmpi.bench.cli", "lpmpi.bench.cases", "lpmpi.bench.rows"])
def test_bench_modules_have_a_docstring_and_no_reach_into_the_package(module):
    """Each module says its job, and none imports ``lpmpi.bench`` itself (its __init__ imports
    them all: that would be a cycle)."""
    path = modules()[module]
    assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert "lpmpi.bench" not in graph()[module]


# ---------------------------------------------------------------- the C engine's layers (src/)
def _src_graph():
    import importlib.util

    spec = importlib.util.spec_from_file_location("src_graph", ROOT / "tools" / "src_graph.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_the_src_graph_sees_the_uses(tmp_path):
    """The reader of src/ finds calls, references to globals and includes (a header beside its
    user, then in src/include/), and the cycles they make (a two-file circle written here), so
    that a clean result below means something."""
    g = _src_graph()
    uses, includes, why = g.graph()
    assert "sched/run.c" in uses["api/request.c"] and "lp_engine_run" in why["api/request.c"]["sched/run.c"]
    assert "sched/reqmem.c" in uses["alg/alg_ring.c"] and "lp_req_area" in why["alg/alg_ring.c"]["sched/reqmem.c"]
    assert "alg/alg_ring.c" in uses["alg/registry.c"] and "lp_sched_ring" in why["alg/registry.c"]["alg/alg_ring.c"]
    assert "include/internal.h" in includes["include/engine.h"]
    assert "transport/shm.h" in includes["alg/alg_ring_shm.c"] and "sched/progress.h" in includes["sched/wait.c"]
    (tmp_path / "a.c").write_text('#include "a.h"\nint fa(void) { return fb(); }\n')
    (tmp_path / "b.c").write_text('/* fa() in a comment is no call */\nint fb(void) { return fa(); }\n')
    (tmp_path / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "b.h").write_text('#include "a.h"\n')
    u, inc, _ = g.graph(tmp_path)
    assert g.cycles(u) == [["a.c", "b.c"]] and g.cycles(inc) == [["a.h", "b.h"]]


def test_no_upward_call_or_include_cycle_in_src():
    """src/ is layers that point one way (entry -> decision -> schedules -> progress -> transports
    -> MPI; docs/design.md): no file uses, through any chain of calls or global references, a file
    that uses it back, and no header includes itself through others.  What ends the engine's state
    sits on top (api/lifecycle.c), a request's memory below the schedules (sched/reqmem.c);
    api/context.c calls lifecycle.c only through the hooks it installs at load."""
    g = _src_graph()
    uses, includes, why = g.graph()
    bad = g.cycles(uses) + g.cycles(includes)
    detail = [f"{a} -> {b}: {', '.join(sorted(why.get(a, {}).get(b, ())))}"
              for c in bad for a in c for b in c if b in why.get(a, {})]
    assert not bad, "cycles between src/ files (tools/src_graph.py):\n" + "\n".join(detail)


def test_no_src_file_uses_a_folder_above_its_own():
    """src/ is folders by layer, and src/LAYERS writes once, bottom to top, which folders each
    one's files may include or call into: every folder of src/ is listed there, each lists only
    folders below it, every file sits in a folder, and no file includes a header of, calls, or
    references a global of a folder its own does not list (alg/ may use transport/, never the
    other way)."""
    g = _src_graph()
    assert not g.order_problems(), "\n".join(g.order_problems())
    uses, includes, why = g.graph()
    wrong = g.upward(uses, includes, why)
    assert not wrong, "src/ files using a folder above their own (src/LAYERS):\n" + "\n".join(wrong)
    # every folder of the documented order is there, in that order (docs/design.md draws it)
    assert [f for f, _ in g.allowed()] == ["include", "core", "obs", "sched", "device", "transport",
                                           "alg", "tune", "api", "ffi"]


def test_the_folder_check_sees_an_upward_use(tmp_path):
    """The check above fails where it should: a low folder's file that calls a function of a
    folder above it, or includes its header, or a LAYERS that lists a folder above, or a file
    outside every folder (a copy of src/ changed here)."""
    g = _src_graph()
    for d in ("low", "high", "include"):
        (tmp_path / d).mkdir()
    (tmp_path / "LAYERS").write_text("include:\nlow: include\nhigh: low include\n")
    (tmp_path / "include" / "api.h").write_text("int hi(void);\n")
    (tmp_path / "high" / "high.h").write_text("#define HIGH 1\n")
    (tmp_path / "high" / "h.c").write_text('#include "api.h"\nint lo(void);\nint hi(void) { return lo(); }\n')
    (tmp_path / "low" / "l.c").write_text('#include "api.h"\nint lo(void) { return 1; }\n')
    u, inc, why = g.graph(tmp_path)
    assert not g.order_problems(tmp_path) and not g.upward(u, inc, why, tmp_path)
    (tmp_path / "low" / "l.c").write_text('#include "../high/high.h"\nint hi(void);\nint lo(void) { return hi(); }\n')
    u, inc, why = g.graph(tmp_path)
    wrong = g.upward(u, inc, why, tmp_path)
    assert any("low/l.c uses high/h.c" in w and "hi" in w for w in wrong), wrong
    assert any("low/l.c includes high/high.h" in w for w in wrong), wrong
    (tmp_path / "LAYERS").write_text("include:\nlow: high include\nhigh: low include\n")
    (tmp_path / "stray.c").write_text("int stray;\n")
    problems = g.order_problems(tmp_path)
    assert any("low may use high, which is not listed below it" in p for p in problems), problems
    assert any("src/stray.c is in no folder" in p for p in problems), problems


# ---------------------------------------------------------------- file sizes
LONG = 700


def test_no_source_file_over_700_lines_without_a_reason():
    """No source file of the engine (src/) or the package (lpmpi/) is over 700 lines unless its
    header says why ("over 700 lines: <reason>" in its first 30 lines): a file that long is
    usually several concerns (issue 51 split progress.c, flight.c, the torch backend, the tables'
    module, the online tuner and the message's checks).  Generated files (Cython's _core.c) aside."""
    too_long = []
    for root, exts in (("src", (".c", ".h", ".cu")), ("lpmpi", (".py", ".pyx", ".pxi", ".pxd", ".pyi"))):
        for p in sorted((ROOT / root).rglob("*")):
            if p.suffix not in exts or p.name == "_core.c" or not p.is_file():
                continue
            text = p.read_text(encoding="utf-8", errors="replace").splitlines()
            if len(text) > LONG and not any("over 700 lines:" in line for line in text[:30]):
                too_long.append(f"{p.relative_to(ROOT)}: {len(text)} lines")
    assert not too_long, "split these, or say why in their header:\n" + "\n".join(too_long)
