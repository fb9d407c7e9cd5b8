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
