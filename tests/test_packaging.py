"""pyproject.toml's extras and README's install commands: ``[test]`` is ``[test-base]`` plus
the exact torch pin this project's CI installs (.ci/run runs README's test command as written),
``[torch]`` takes any torch 2, README says how to get the CPU build elsewhere; and without torch
the torch tests skip, saying why, while the rest runs."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from _mpi import NO_TORCH, TESTS, child_env

ROOT = TESTS.parent
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def extras() -> dict[str, list[str]]:
    try:
        import tomllib
    except ImportError:                      # Python < 3.11
        tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml needs Python 3.11 or tomli")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def test_test_extra_is_test_base_and_the_ci_torch_pin():
    x = extras()
    assert x["test"] == [*x["test-base"], "torch==2.13.0"], x["test"]
    assert not any(r.startswith("torch") for r in x["test-base"]), x["test-base"]
    assert x["torch"] == ["torch>=2.1,<3"]


def test_readme_keeps_the_ci_commands_and_says_how_to_install_elsewhere():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    # .ci/run's two patterns, as grep -m1 applies them to README.md
    patterns = re.findall(r"grep -m1 (?:-A0 )?'([^']*)' README\.md|grep -m1 \"([^\"]*)\" README\.md", ci)
    found = [subprocess.run(["grep", "-m1", a or b, "README.md"], cwd=str(ROOT), capture_output=True,
                            text=True, timeout=30, check=False).stdout.strip() for a, b in patterns]
    assert found == ["python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/mpiexec -n 2 .venv/bin/lpmpi-bench",
                     "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/pytest"], found
    assert "'.[test-base]'" in readme and f"pip install torch {CPU_INDEX}" in readme
    assert "torch==2.13.0" in readme


def test_torch_tests_skip_with_the_reason_where_torch_is_absent(tmp_path):
    """A Python that finds no torch (a ``torch`` package that fails to import, first on the
    path): the torch tests are skipped with NO_TORCH as the reason; the DLPack-only ones run."""
    block = tmp_path / "block" / "torch"
    block.mkdir(parents=True)
    (block / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = child_env()
    env["PYTHONPATH"] = f"{block.parent}:{env.get('PYTHONPATH', '')}".rstrip(":")
    tests = ["test_dlpack.py::test_results_and_kinds", "test_dlpack.py::test_other_devices_and_failing_producers",
             "test_acc_dtype.py::test_acc_dtype_spellings_and_result_kind", "test_ddp.py"]
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests],
                       cwd=str(TESTS), env=env, capture_output=True, text=True, timeout=300, check=False)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert len(skipped) == 3 and all(NO_TORCH in ln for ln in skipped), out[-4000:]
    assert re.search(r"\b1 passed", out) and "test_other_devices" not in "".join(skipped), out[-4000:]


def test_the_ddp_example_needs_nothing_but_torch_numpy_mpi4py():
    text = (ROOT / "examples" / "ddp_torch.py").read_text()
    mods = set(re.findall(r"^\s*(?:from|import) (\w+)", text, flags=re.MULTILINE))
    assert mods <= {"__future__", "argparse", "hashlib", "statistics", "sys", "time", "numpy", "torch",
                    "mpi4py", "lpmpi"}, mods
