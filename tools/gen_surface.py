"""The public surface of the collectives whose functions lpmpi makes from their rows
(``lpmpi._core.BLOCK_FUNCTIONS``: alltoall, alltoallv, allgatherv, gather, scatter and their i-
and _init forms), written from the engine's rows and the runtime's signatures into the stubs
(lpmpi/__init__.pyi) and docs/api.md, between their ``BEGIN generated`` / ``END generated``
markers, and the ``Collective`` literal of the stubs from ``lpmpi.engine.COLLECTIVES``.

    python tools/gen_surface.py           # rewrite the two files
    python tools/gen_surface.py --check   # exit 1 (saying which) when they are not up to date

tests/test_api_surface.py runs the check, so that adding a collective's row and builder is
followed by this command, not by hand edits in three places."""
from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

import lpmpi
from lpmpi import _core, engine

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "lpmpi" / "__init__.pyi"
API = ROOT / "docs" / "api.md"
ANN = {"sendbuf": "Any", "recvbuf": "Any", "buf": "Any", "sendcounts": "Sequence[int]",
       "recvcounts": "Sequence[int] | None", "counts": "Sequence[int] | None", "op": "OpLike",
       "root": "int", "comm": "MPI.Comm | None", "sdispls": "Sequence[int] | None",
       "rdispls": "Sequence[int] | None", "displs": "Sequence[int] | None", "algorithm": "str",
       "chunk_bytes": "int | None", "acc_dtype": "str | None"}


def _params(sig: inspect.Signature, typed: bool) -> str:
    out, star = [], False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        s = p.name + (f": {ANN[p.name]}" if typed else "")
        if p.default is not p.empty:
            s += (" = " if typed else "=") + repr(p.default)
        out.append(s)
    return ", ".join(out)


def _names() -> list[str]:
    """The generated functions, collective by collective (blocking, i, _init)."""
    colls = [c for c in engine.COLLECTIVES if c in _core.BLOCK_FUNCTIONS]
    return [n for c in colls for n in (c, f"i{c}", f"{c}_init")]


def stub_block() -> str:
    lines = [f"Collective: TypeAlias = Literal[{', '.join(repr(c) for c in engine.COLLECTIVES)}]"]
    for name in _names():
        sig = inspect.signature(getattr(lpmpi, name))
        ret = "Any" if name in engine.COLLECTIVES else "Request"
        lines.append(f"def {name}({_params(sig, True)}) -> {ret}: ...")
    return "\n".join(lines) + "\n"


def api_block() -> str:
    lines = ["```text"]
    for c in engine.COLLECTIVES:
        if c in _core.BLOCK_FUNCTIONS:
            lines.append(f"{c}({_params(inspect.signature(getattr(lpmpi, c)), False)})")
    lines.append("# their nonblocking and persistent forms, the same arguments -> Request:")
    rest = [f"{n}(...)" for n in _names() if n not in engine.COLLECTIVES]
    for i in range(0, len(rest), 4):
        lines.append(", ".join(rest[i:i + 4]))
    lines.append("```")
    return "\n".join(lines) + "\n"


def _replace(text: str, block: str, begin: str, end: str, path: Path) -> str:
    pat = re.compile(rf"({re.escape(begin)}\n)(.*?)(^{re.escape(end)})", re.DOTALL | re.MULTILINE)
    if not pat.search(text):
        raise SystemExit(f"{path}: no {begin!r} ... {end!r} markers")
    return pat.sub(lambda m: m.group(1) + block + m.group(3), text, count=1)


def render() -> dict[Path, str]:
    stub = _replace(STUB.read_text(), stub_block(), "# BEGIN generated: tools/gen_surface.py",
                    "# END generated", STUB)
    api = _replace(API.read_text(), api_block(), "<!-- BEGIN generated: tools/gen_surface.py -->",
                   "<!-- END generated -->", API)
    return {STUB: stub, API: api}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when the files are not up to date")
    args = ap.parse_args(argv)
    stale = []
    for path, text in render().items():
        if path.read_text() != text:
            stale.append(path)
            if not args.check:
                path.write_text(text)
    if args.check and stale:
        print(f"not up to date: {', '.join(str(p.relative_to(ROOT)) for p in stale)}; run "
              f"python tools/gen_surface.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
