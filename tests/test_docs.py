"""The documentation's examples run as written and print what the documentation says.

Every ```python block of README.md and docs/api.md is a complete script, run here under
``mpiexec -n 2`` (with a hard timeout) from a directory outside the checkout, and must exit 0.

Its printed output is checked where the documentation shows it.  The convention: a ```python
block followed by a ```text block, with only prose between them (no other fenced block, no
heading), shows that script's standard output at P = 2.  Lines are compared one by one, in
order, ignoring trailing blanks and blank lines.  Two placeholders stand for what truly varies
(timings, paths, the machine's tuning table and model):

- a line that is just ``...`` matches any number of lines (none included);
- ``...`` inside a line matches any text within that line.

Anything else must be printed exactly.  An example whose ranks each print prints through rank 0
(gathered, in rank order), so that its output has one order.  Standard error is not compared.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _mpi import NO_JAX, NO_TORCH, child_env, mpiexec, run_split

pytestmark = pytest.mark.mpi

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/api.md")
FENCE = re.compile(r"^```(\w*)\s*$")


def fenced_blocks(text: str) -> list[tuple[str, str, bool]]:
    """``(language, body, heading_before)`` of every fenced block, in order; ``heading_before``
    says whether a Markdown heading stands between this block and the one before it."""
    out, lang, body, heading = [], None, [], False
    for line in text.splitlines():
        m = FENCE.match(line)
        if lang is None:
            if m:
                lang, body = m.group(1), []
            elif line.startswith("#"):
                heading = True
        elif line.strip() == "```":
            out.append((lang, "\n".join(body) + "\n", heading))
            lang, heading = None, False
        else:
            body.append(line)
    return out


def examples_of(text: str) -> list[tuple[str, str | None]]:
    """``(script, expected output or None)`` of every ```python block."""
    blocks = fenced_blocks(text)
    out = []
    for i, (lang, body, _) in enumerate(blocks):
        if lang != "python":
            continue
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        expected = nxt[1] if nxt is not None and nxt[0] == "text" and not nxt[2] else None
        out.append((body, expected))
    return out


def examples():
    out = []
    for doc in DOCS:
        for i, (code, expected) in enumerate(examples_of((ROOT / doc).read_text())):
            out.append(pytest.param(code, expected, id=f"{doc}#{i}"))
    return out


def _line_matches(pattern: str, line: str) -> bool:
    parts = pattern.split("...")
    return re.fullmatch(".*".join(re.escape(p) for p in parts), line) is not None


def output_matches(expected: str, actual: str) -> bool:
    """``actual`` against ``expected`` under the convention of this module's docstring."""
    want = [ln.rstrip() for ln in expected.splitlines() if ln.strip()]
    got = [ln.rstrip() for ln in actual.splitlines() if ln.strip()]

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if want[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and _line_matches(want[i], got[j]) and match(i + 1, j + 1)

    return match(0, 0)


def test_the_convention():
    text = "x\n```python\nprint(1)\n```\nIt prints:\n\n```text\n1\n```\n## B\n```python\npass\n```\n" \
           "## C\n```text\nsig()\n```\n```python\npass\n```\n```bash\nls\n```\n```text\nno\n```\n"
    assert examples_of(text) == [("print(1)\n", "1\n"), ("pass\n", None), ("pass\n", None)]
    assert output_matches("a\n...\nd ... f\n", "a\nb\nc\nd e f\n")
    assert output_matches("a\n...\n", "a\n") and output_matches("a 1.0 ... us\n", "a 1.0 3.5 us  \n\n")
    assert not output_matches("a\nb\n", "a\nb\nc\n") and not output_matches("a (x)\n", "a (y)\n")
    assert not output_matches("d ... f\n", "d e\nf\n")          # within one line only


@pytest.mark.parametrize("code,expected", examples())
def test_example_runs(tmp_path, code, expected):
    if re.search(r"^import torch|^from torch|^import .*\btorch\b", code, flags=re.MULTILINE):
        pytest.importorskip("torch", reason=NO_TORCH)
    if re.search(r"^import jax|^from jax|^import .*\bjax\b", code, flags=re.MULTILINE):
        pytest.importorskip("jax", reason=NO_JAX)
    script = tmp_path / "example.py"
    script.write_text(code)
    t0 = time.monotonic()
    rc, out, err = run_split([mpiexec(), "-n", "2", sys.executable, str(script)], child_env(), 120)
    what = "timed out" if rc is None else f"exit status {rc}"
    assert rc == 0, f"{what} after {time.monotonic() - t0:.0f} s:\n{code}\n--- stdout\n{out[-4000:]}\n" \
                    f"--- stderr\n{err[-4000:]}"
    if expected is not None:
        assert output_matches(expected, out), f"the printed output differs from the documented one\n" \
                                              f"--- documented\n{expected}--- printed\n{out}"


def test_environment_tables_match_the_variables_lpmpi_reads():
    """README.md and docs/api.md carry lpmpi._env.table_text() verbatim: every variable lpmpi
    reads, and only those."""
    from pathlib import Path

    from lpmpi import _env

    root = Path(__file__).resolve().parent.parent
    for doc in ("README.md", "docs/api.md"):
        assert _env.table_text() in (root / doc).read_text(), f"{doc}: regenerate its table with _env.table_text()"


def test_readme_algorithm_tables_match_the_registry():
    """README's "Algorithms" tables name every algorithm of the registry in a column of every
    collective it serves, and no algorithm it lacks (issue 51: pairwise, linear and the six
    newer collectives were missing)."""
    from lpmpi import _core

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Algorithms", 1)[1].split("\n## ", 1)[0]
    served: dict[str, set[str]] = {}
    for table in re.split(r"\n\s*\n", section):
        rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in table.splitlines()
                if ln.startswith("|") and not ln.startswith("|---")]
        if not rows or rows[0][0] != "name":
            continue
        head = rows[0]
        for row in rows[1:]:
            alg = row[0].strip("`")
            for col, cell in zip(head[1:], row[1:]):
                if cell not in ("–", "-", "") and col != "chunked":
                    served.setdefault(alg, set()).update(re.findall(r"[a-z_]+", col))
    for coll in _core.COLLECTIVES:
        words = {"reduce_scatter_v": {"counts"}}.get(coll, {coll})
        for alg, _, _ in _core._algorithm_info(coll):
            assert words & served.get(alg, set()), f"README's algorithm tables lack {alg} for {coll}"
    known = {a for c in _core.COLLECTIVES for a, _, _ in _core._algorithm_info(c)}
    assert set(served) <= known, set(served) - known


def test_floor_program_builds_and_its_designs_agree(tmp_path):
    """tools/floor_p2.c (the two-process floors of docs/performance-archive.md, issue 14's third round)
    compiles and runs: every design computes the right sum (it exits 1 on a wrong element) and
    prints its time."""
    import shutil

    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "a C compiler (lpmpi's own build needs one)"
    exe = tmp_path / "floor_p2"
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "tools" / "floor_p2.c")], check=True, timeout=120)
    p = subprocess.run([str(exe), "65536", "16384", "2"], capture_output=True, text=True, timeout=120, check=False)
    if p.returncode == 3:
        pytest.skip("process_vm_readv is refused here (ptrace permissions): its cma designs cannot run")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split()[0] for line in p.stdout.splitlines() if not line.startswith("#")]
    assert rows == ["direct", "cma", "cma-bulk", "shm", "shm-nt"], p.stdout
    assert subprocess.run([str(exe), "8"], capture_output=True, timeout=30, check=False).returncode == 2
