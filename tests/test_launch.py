"""The command-line tools and how they were started (lpmpi/_launch.py): ``lpmpi-bench`` and
``lpmpi-tune`` refuse to run as one process (exit status 2, one line on stderr) unless
``--allow-single``; ``lpmpi-info`` says it is one process; a process that another MPI's launcher
started (its environment says N > 1 processes, MPI sees one) hears that the launcher does not
match the MPI library mpi4py uses; and ``lpmpi-tune`` without Optuna: ``--help`` works and a run
ends with one line saying how to install it."""
from __future__ import annotations

import subprocess
import sys

import pytest
from _mpi import TESTS, child_env, mpiexec, run

from lpmpi import _launch

MPICH = "MPICH Version:      5.0.2\nMPICH Release date: x\nMPICH configure: --with-pm=hydra"
FOREIGN = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"}   # Open MPI's mpiexec, -n 2


def alone(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python args`` as one process (no mpiexec), stdout and stderr apart."""
    return subprocess.run([sys.executable, *args], env=child_env(env), capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=str(TESTS))


# ----------------------------------------------------------------------------- unit


def test_launcher_traces_and_the_mismatch():
    assert _launch.launcher_traces({}) == []
    assert _launch.launcher_traces({"PMI_SIZE": "2", "PMI_RANK": "0"}) == [
        ("PMI_SIZE=2", "a PMI launcher (MPICH's or Intel MPI's mpiexec)", 2)]
    assert _launch.launcher_traces({"PMI_SIZE": "2", "I_MPI_PIN": "1"})[0][1] == "Intel MPI's mpiexec"
    assert _launch.launcher_traces({"PMIX_RANK": "1"})[0][2] is None
    # a Slurm job's own shell (no srun: no SLURM_PROCID) is no launcher's trace
    assert _launch.launcher_traces({"SLURM_NTASKS": "8"}) == []
    # MPICH's own mpiexec -n 2: P = 2, no mismatch; -n 1: P = 1, no mismatch either
    assert _launch.mismatch(2, {"PMI_SIZE": "2"}, MPICH) is None
    assert _launch.mismatch(1, {"PMI_SIZE": "1"}, MPICH) is None
    why = _launch.mismatch(1, FOREIGN, MPICH, "lpmpi-bench")
    assert "Open MPI's mpiexec started 2 processes (OMPI_COMM_WORLD_SIZE=2)" in why, why
    assert "does not match the MPI library mpi4py uses, MPICH Version: 5.0.2." in why, why
    assert "-n 2" in why and "lpmpi-bench" in why, why
    why = _launch.mismatch(1, {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "4"}, MPICH)
    assert "Slurm's srun started 4 processes" in why, why


def test_single_process_problem_and_refusal(capsys):
    assert _launch.single_process_problem("lpmpi-bench", 2, {}, MPICH) is None
    text = _launch.single_process_problem("lpmpi-bench", 1, {}, MPICH)
    assert text.startswith("lpmpi-bench: this is one process (P = 1)") and "--allow-single" in text, text
    assert "mpiexec -n 2" in text and "\n" not in text, text
    assert _launch.refuse_single("lpmpi-tune", 2, False, {}, MPICH) is None
    assert _launch.refuse_single("lpmpi-tune", 1, True, {}, MPICH) is None          # --allow-single
    assert _launch.refuse_single("lpmpi-tune", 1, False, {}, MPICH) == 2
    assert "lpmpi-tune: this is one process" in capsys.readouterr().err
    # N processes that would each run alone: refused even with --allow-single
    assert _launch.refuse_single("lpmpi-tune", 1, True, FOREIGN, MPICH) == 2
    assert "does not match the MPI library" in capsys.readouterr().err
    assert _launch.info_lines(2, {}, MPICH) == []
    assert _launch.info_lines(1, {}, MPICH)[0].startswith("launch: one process (P = 1")
    assert "does not match" in _launch.info_lines(1, FOREIGN, MPICH)[0]


def test_a_pmix_launcher_with_an_mpich_library_is_named_before_mpi_init():
    """MPICH without PMIx aborts in MPI_Init under a PMIx launcher (Open MPI's mpiexec):
    preinit_problem says why beforehand (from the version text, or, where mpi4py.MPI is not
    imported, a child process that reads it without initializing MPI)."""
    assert _launch.preinit_problem({}, MPICH) is None
    why = _launch.preinit_problem({"PMIX_RANK": "0"}, MPICH)
    assert "PMIx launcher" in why and "MPICH Version: 5.0.2, has no PMIx support" in why, why
    assert _launch.preinit_problem({"PMIX_RANK": "0"}, "Open MPI v5.0.3, package: Open MPI") is None
    assert _launch.preinit_problem({"PMIX_RANK": "0"}, MPICH + " --with-pmix=/usr") is None
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('launch', {_launch.__file__!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(m.preinit_problem({'PMIX_RANK': '0', 'PATH': ''}))\n"
            "print('mpi4py.MPI' in sys.modules)\n")
    p = alone("-c", code)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1] == "False", p.stdout                      # this process never loaded MPI
    if _launch.library_line(_library()).startswith("MPICH"):
        assert "has no PMIx support" in lines[0], p.stdout


def _library() -> str:
    from mpi4py import MPI

    return MPI.Get_library_version()


# ----------------------------------------------------------------------------- the commands alone


@pytest.mark.parametrize("prog,module", [("lpmpi-bench", "lpmpi.bench"), ("lpmpi-tune", "lpmpi.tune")])
def test_bench_and_tune_refuse_one_process(prog, module, tmp_path):
    p = alone("-m", module, "--out" if module == "lpmpi.tune" else "--json", str(tmp_path / "x.json"))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().startswith(f"{prog}: this is one process (P = 1): start it under mpiexec"), p.stderr
    assert "--allow-single" in p.stderr and "Traceback" not in p.stderr and p.stdout == "", p.stdout
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("module", ["lpmpi.bench", "lpmpi.tune"])
def test_another_mpis_launcher_is_named(module, tmp_path):
    """Open MPI's mpiexec starting an MPICH-built program: each process is a singleton whose
    environment says 2; the refusal names the library mpi4py uses, --allow-single or not."""
    p = alone("-m", module, "--allow-single", "--out" if module == "lpmpi.tune" else "--json",
              str(tmp_path / "x.json"), env=FOREIGN)
    assert p.returncode == 2, p.stdout + p.stderr
    lib = _launch.library_line(_library())
    assert f"does not match the MPI library mpi4py uses, {lib}" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "x.json").exists()


def test_info_says_it_is_one_process():
    p = alone("-m", "lpmpi", "info", env={"LPMPI_TUNING_FILE": "none"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "processes: 1\nlaunch: one process (P = 1, not started by mpiexec)" in p.stdout, p.stdout
    assert "mpiexec -n 2" in p.stdout
    p = alone("-m", "lpmpi", "info", env={"LPMPI_TUNING_FILE": "none", **FOREIGN})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "launch: the environment says Open MPI's mpiexec started 2 processes" in p.stdout, p.stdout


@pytest.mark.mpi
def test_info_under_mpiexec_has_no_launch_line():
    rc, out, _ = run([mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi", "info"],
                     child_env({"LPMPI_TUNING_FILE": "none"}), 60)
    assert rc == 0, out[-3000:]
    assert "processes: 2" in out and "launch:" not in out, out


# ----------------------------------------------------------------------------- the tuner without Optuna


@pytest.fixture
def no_optuna(tmp_path):
    """Environment whose Python finds an ``optuna`` that cannot be imported (as where it is not
    installed)."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "optuna.py").write_text("raise ModuleNotFoundError(\"No module named 'optuna'\", name='optuna')\n")
    env = child_env()
    return {"PYTHONPATH": f"{block}:{env.get('PYTHONPATH', '')}".rstrip(":")}


def test_tune_help_without_optuna(no_optuna):
    p = alone("-m", "lpmpi.tune", "--help", env=no_optuna)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "--max-trials-this-run" in p.stdout and "pip install 'lpmpi[tune]'" in p.stdout
    assert "Traceback" not in p.stdout + p.stderr


def test_import_lpmpi_imports_neither_the_tuner_nor_optuna():
    code = ("import sys, lpmpi, lpmpi.bench, lpmpi.tables, lpmpi.model\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'optuna' or m.startswith('lpmpi.tune')))")
    p = alone("-c", code)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "[]", p.stdout


def test_python_m_lpmpi_tune_is_lpmpi_tune(no_optuna):
    p = alone("-m", "lpmpi", "tune", "--help", env=no_optuna)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("usage: lpmpi-tune") and "--max-trials-this-run" in p.stdout, p.stdout


def test_tune_without_optuna_says_how_to_install_it(no_optuna, tmp_path):
    args = ["-m", "lpmpi.tune", "--storage", "memory", "--sizes", "8", "--out", str(tmp_path / "t.json")]
    p = alone(*args, "--allow-single", env=no_optuna)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip() == ("lpmpi-tune needs Optuna, which is not installed here: pip install "
                                "'lpmpi[tune]' (in a checkout: pip install '.[tune]')"), p.stderr
    assert p.stdout == "" and not (tmp_path / "t.json").exists()


@pytest.mark.mpi
def test_tune_without_optuna_under_mpiexec_says_it_once(no_optuna, tmp_path):
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.tune", "--storage", "memory", "--sizes", "8",
           "--out", str(tmp_path / "t.json")]
    rc, out, _ = run(cmd, child_env(no_optuna), 60)
    assert rc == 2, out[-3000:]
    from lpmpi.tune.cli import OPTUNA_MISSING

    assert out.strip().splitlines() == [OPTUNA_MISSING], out


def test_the_tests_remove_the_mpich_shm_files_killed_ranks_leak():
    """A rank killed during MPICH's shared-memory bootstrap leaves /dev/shm/mpich_shm_<id>_0;
    a later process of another user whose pid is that id then fails MPI_Init (it happened to
    test_cluster's unprivileged run in CI).  The reaper removes this session's leaked files and
    keeps those a live process holds."""
    import os
    from pathlib import Path

    import _mpi
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    leaked = Path("/dev/shm/mpich_shm_7ffffff0_0")
    held = Path("/dev/shm/mpich_shm_7ffffff1_0")
    for p in (leaked, held):
        p.write_bytes(b"x")
    fd = os.open(held, os.O_RDONLY)
    try:
        assert _mpi.reap_leaked_mpich_shm() >= 1
        assert not leaked.exists() and held.exists()
    finally:
        os.close(fd)
        for p in (leaked, held):
            p.unlink(missing_ok=True)
