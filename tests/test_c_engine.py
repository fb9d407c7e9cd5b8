"""Builds the C engine with CMake and runs its unit tests with ctest (reduction kernels for
every dtype/op pairing, and every algorithm at P = 1..5 under mpiexec)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name):
    path = BIN / name
    return str(path) if path.exists() else shutil.which(name)


def test_ctest(tmp_path):
    cmake, ctest, mpicc, mpiexec = (_tool(t) for t in ("cmake", "ctest", "mpicc", "mpiexec"))
    assert cmake and ctest, "cmake is a test dependency: pip install '.[test]'"
    assert mpicc and mpiexec, "mpicc/mpiexec not found (the mpich wheel provides them)"
    env = dict(os.environ, MPIR_CVAR_CH4_PROGRESS_THROTTLE="1",
               MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT="16")
    build = tmp_path / "build"
    run = lambda *cmd, t: subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                                         timeout=t)
    r = run(cmake, "-S", str(ROOT), "-B", str(build), f"-DMPI_C_COMPILER={mpicc}",
            f"-DMPIEXEC_EXECUTABLE={mpiexec}", t=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(cmake, "--build", str(build), "-j2", t=600)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(ctest, "--test-dir", str(build), "--output-on-failure", "--timeout", "120", t=900)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "100% tests passed" in r.stdout
