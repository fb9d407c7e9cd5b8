"""The graph of src/: which C file uses which (a call or a reference to a function or global
defined, not static, in another file), and which file includes which header; their cycles; and
the folders' order (src/LAYERS: each folder, bottom to top, with the folders it may use).

    python tools/src_graph.py            # the layers (files grouped by depth), any cycle, and
                                         # any file that uses a folder src/LAYERS does not allow
    python tools/src_graph.py --dot      # the file graph for graphviz

Files are named by their path under src/ ("alg/alg_ring.c").  A header is found as the compiler
finds it: beside the including file, then in src/include/.  tests/test_layout.py fails on any
cycle and on any use of a folder that src/LAYERS does not list for the user's own folder: the
engine's folders form layers that point one way (docs/design.md)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')
_DEF = re.compile(r"^(?!static\b)(?!typedef\b)(?!extern\b)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(([^;{]*?)\)\s*\{",
                  re.MULTILINE | re.DOTALL)
_GLOBAL = re.compile(r"^(?!static\b)(?!typedef\b)(?!extern\b)(?:const\s+)?[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)"
                     r"\s*(?:\[[^\]]*\])?\s*(?:=[^;]*)?;", re.MULTILINE)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def _name(p: Path, src: Path) -> str:
    return p.relative_to(src).as_posix()


def _header(src: Path, user: str, inc: str) -> str | None:
    """The src/-relative name of the header `#include "inc"` in file `user` reads (beside it,
    then src/include/), or None where it is not one of src/'s (a system or MPI header)."""
    for base in ((src / user).parent, src / "include"):
        p = (base / inc).resolve()
        if p.is_file() and src.resolve() in p.parents:
            return p.relative_to(src.resolve()).as_posix()
    return None


def folder(name: str) -> str:
    """The folder of a src/ file ("alg/alg_ring.c" -> "alg"; "" at src/'s top)."""
    return name.split("/", 1)[0] if "/" in name else ""


def allowed(src: Path = SRC) -> list[tuple[str, set[str]]]:
    """src/LAYERS: [(folder, the folders it may use)], bottom to top."""
    out = []
    for line in (src / "LAYERS").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, rest = line.partition(":")
            out.append((name.strip(), set(rest.split())))
    return out


def order_problems(src: Path = SRC) -> list[str]:
    """What is wrong with src/LAYERS itself: a folder listed twice, a folder it names that is not
    listed before it (calls go down the file), a folder of src/ it does not list, or a file at
    src/'s top (every file is in a folder)."""
    out, seen = [], []
    for name, may in allowed(src):
        if name in seen:
            out.append(f"src/LAYERS lists {name} twice")
        for m in sorted(may - set(seen)):
            out.append(f"src/LAYERS: {name} may use {m}, which is not listed below it")
        seen.append(name)
    dirs = {p.name for p in src.iterdir() if p.is_dir()}
    out += [f"src/{d}/ is not in src/LAYERS" for d in sorted(dirs - set(seen))]
    out += [f"src/LAYERS names {d}, which is no folder of src/" for d in seen if d not in dirs]
    out += [f"src/{p.name} is in no folder" for p in sorted(src.glob("*.[ch]"))]
    return out


def upward(uses: dict[str, set[str]], includes: dict[str, set[str]], why: dict[str, dict[str, set[str]]],
           src: Path = SRC) -> list[str]:
    """Every use (a call or global: `uses`; an #include: `includes`) of a file in a folder that
    src/LAYERS does not list for the user's folder, as "a -> b: what"."""
    may = dict(allowed(src))
    out = []
    for kind, edges in (("uses", uses), ("includes", includes)):
        for a, bs in sorted(edges.items()):
            for b in sorted(bs):
                fa, fb = folder(a), folder(b)
                if fa != fb and fb not in may.get(fa, set()):
                    names = ", ".join(sorted(why.get(a, {}).get(b, ()))) if kind == "uses" else b
                    out.append(f"{a} {kind} {b} ({fa or 'src'}/ may not use {fb or 'src'}/): {names}")
    return out


def _clean(text: str) -> str:
    text = _COMMENT.sub(" ", text)
    text = _STRING.sub('""', text)
    # preprocessor lines (other than includes, read before) define nothing we track
    return re.sub(r"^\s*#.*?(?<!\\)$", "", text, flags=re.MULTILINE)


def _top_level(text: str) -> str:
    """The file with every brace block's inside removed (what is left: top-level declarations)."""
    out, depth = [], 0
    for ch in text:
        if ch == "{":
            depth += 1
            if depth == 1:
                out.append("{")
            continue
        if ch == "}":
            depth -= 1
            if depth == 0:
                out.append("}")
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)


def graph(src: Path = SRC) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, dict[str, set[str]]]]:
    """(uses, includes, why): uses[f] = the .c files whose non-static names f uses; includes[f] =
    the headers f includes (of src/); why[f][g] = the names behind the edge f -> g."""
    files = sorted(p for p in src.rglob("*.[ch]"))
    raw = {_name(p, src): p.read_text(encoding="utf-8", errors="replace") for p in files}
    includes = {n: {h for h in (_header(src, n, i) for i in _INCLUDE.findall(t)) if h}
                for n, t in raw.items()}
    clean = {n: _clean(t) for n, t in raw.items()}
    owner: dict[str, str] = {}
    for n, t in clean.items():
        if not n.endswith(".c"):
            continue
        for m in _DEF.finditer(t):
            owner.setdefault(m.group(1), n)
        top = _top_level(t)
        for m in _GLOBAL.finditer(top):
            if "(" not in m.group(0):
                owner.setdefault(m.group(1), n)
    uses: dict[str, set[str]] = {n: set() for n in clean if n.endswith(".c")}
    why: dict[str, dict[str, set[str]]] = {n: {} for n in uses}
    for n, used in uses.items():
        for ident in set(_IDENT.findall(clean[n])):
            o = owner.get(ident)
            if o and o != n:
                used.add(o)
                why[n].setdefault(o, set()).add(ident)
    return uses, includes, why


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layers(edges: dict[str, set[str]]) -> list[list[str]]:
    """Files by depth: layer 0 uses no other file, layer k only files of layers below k."""
    depth: dict[str, int] = {}

    def d(v: str, seen: frozenset = frozenset()) -> int:
        if v in depth:
            return depth[v]
        if v in seen:
            return 0
        depth[v] = 1 + max((d(w, seen | {v}) for w in edges.get(v, ())), default=-1)
        return depth[v]

    for v in edges:
        d(v)
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for v, k in depth.items():
        out[k].append(v)
    return [sorted(x) for x in out]


def main(argv: list[str]) -> int:
    uses, includes, why = graph()
    if "--dot" in argv:
        print("digraph src {")
        for a, bs in sorted(uses.items()):
            for b in sorted(bs):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    bad = cycles(uses) + cycles(includes)
    for k, layer in enumerate(layers(uses)):
        print(f"layer {k}: {' '.join(layer)}")
    wrong = order_problems() + upward(uses, includes, why)
    for w in wrong:
        print(f"UPWARD: {w}")
    for c in bad:
        print(f"CYCLE: {' '.join(c)}")
        for a in c:
            for b in c:
                if b in why.get(a, {}):
                    print(f"  {a} -> {b}: {', '.join(sorted(why[a][b]))}")
    return 1 if bad or wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
