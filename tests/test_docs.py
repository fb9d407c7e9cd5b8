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
