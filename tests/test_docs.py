"""The documentation's examples run as written: every ```python block of README.md and
docs/api.md is a complete script, run here under ``mpiexec -n 2`` (with a hard timeout) from a
directory outside the checkout, and must exit 0."""
import re
import sys
from pathlib import Path

import pytest
from _mpi import child_env, mpiexec, run

pytestmark = pytest.mark.mpi

ROOT = Path(__file__).resolve().parent.parent


def examples():
    out = []
    for doc in ("README.md", "docs/api.md"):
        text = (ROOT / doc).read_text()
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)):
            out.append(pytest.param(block, id=f"{doc}#{i}"))
    return out


@pytest.mark.parametrize("code", examples())
def test_example_runs(tmp_path, code):
    script = tmp_path / "example.py"
    script.write_text(code)
    rc, out, _ = run([mpiexec(), "-n", "2", sys.executable, str(script)], child_env(), 120)
    assert rc == 0, f"exit status {rc} ({'timed out' if rc is None else 'failed'}):\n{code}\n---\n{out[-4000:]}"


def test_environment_tables_match_the_variables_lpmpi_reads():
    """README.md and docs/api.md carry lpmpi._env.table_text() verbatim: every variable lpmpi
    reads, and only those."""
    from pathlib import Path

    from lpmpi import _env

    root = Path(__file__).resolve().parent.parent
    for doc in ("README.md", "docs/api.md"):
        assert _env.table_text() in (root / doc).read_text(), f"{doc}: regenerate its table with _env.table_text()"


def test_floor_program_builds_and_its_designs_agree(tmp_path):
    """docs/floor_p2.c (the two-process floors of docs/performance.md, issue 14's third round)
    compiles and runs: every design computes the right sum (it exits 1 on a wrong element) and
    prints its time."""
    import shutil
    import subprocess

    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "a C compiler (lpmpi's own build needs one)"
    exe = tmp_path / "floor_p2"
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "docs" / "floor_p2.c")], check=True, timeout=120)
    p = subprocess.run([str(exe), "65536", "16384", "2"], capture_output=True, text=True, timeout=120, check=False)
    if p.returncode == 3:
        pytest.skip("process_vm_readv is refused here (ptrace permissions): its cma designs cannot run")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split()[0] for line in p.stdout.splitlines() if not line.startswith("#")]
    assert rows == ["direct", "cma", "cma-bulk", "shm", "shm-nt"], p.stdout
    assert subprocess.run([str(exe), "8"], capture_output=True, timeout=30, check=False).returncode == 2
