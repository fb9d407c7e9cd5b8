"""Helpers for tests that spawn ``mpiexec`` (one spawn runs a whole matrix of cases)."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CASES = TESTS / "mpi_cases.py"

# the reason the torch tests give where torch is not installed (pyproject.toml: the [test] extra
# pins this project's CI build; elsewhere [test-base] and torch's CPU wheel, README "Tests")
NO_TORCH = ("torch is not installed: pip install 'lpmpi[torch]', or its CPU build alone: "
            "pip install torch --index-url https://download.pytorch.org/whl/cpu")

# the reason the JAX tests give where JAX is not installed (the [test] extra pins it)
NO_JAX = "jax is not installed: pip install 'lpmpi[jax]'"

# process counts exercised by the spawning tests; P >= 3 oversubscribes a 2-core machine, so
# those runs use a deterministic sample of the matrix (every Nth case by hash).
NPROCS = (1, 2, 3, 4, 5)


def mpiexec() -> str:
    """mpiexec of the environment running the tests, else the one on PATH."""
    cand = Path(sys.executable).parent / "mpiexec"
    if cand.exists():
        return str(cand)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        pytest.fail("mpiexec not found next to sys.executable nor on PATH")
    return found


def lpmpi_path() -> str | None:
    """Directory to put on the children's PYTHONPATH so they import the same lpmpi as this
    process would (found without importing it)."""
    spec = importlib.util.find_spec("lpmpi")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def child_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_CVAR_", "LPMPI_"))}
    paths = [p for p in (lpmpi_path(),) if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    # oversubscribed MPICH (P > cores) busy-polls; throttling makes waiting ranks yield
    env["MPIR_CVAR_CH4_PROGRESS_THROTTLE"] = "1"
    env["MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT"] = "16"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    # the watchdog's flight-recorder dumps (tests that time out on purpose) out of the tree
    env["LPMPI_FR_DIR"] = os.path.join(tempfile.gettempdir(), f"lpmpi-tests-fr-{os.getpid()}")
    # the online tuner's learned rows: no per-machine cache (~/.cache/lpmpi) read or written by
    # the tests, whose keys would then start settled from an earlier test's run
    env["LPMPI_AUTOTUNE_FILE"] = "none"
    if extra:
        env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd: list[str], env: dict, timeout: float) -> tuple[int | None, str, float]:
    """Run cmd in its own process group; kill the whole group on timeout.
    Returns (returncode or None on timeout, combined output, seconds)."""
    t0 = time.monotonic()
    rc, out, _ = run_split(cmd, env, timeout, merge=True)
    return rc, out, time.monotonic() - t0


def run_split(cmd: list[str], env: dict, timeout: float, merge: bool = False) -> tuple[int | None, str, str]:
    """Run cmd in its own process group (cwd: tests/, not the repo root: `python -c` puts cwd
    first), stdout and stderr apart (merge: stderr into stdout); kill the whole group on
    timeout.  Returns (returncode or None on timeout, stdout, stderr)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True, cwd=str(TESTS))
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err or ""
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        reap_leaked_mpich_shm()
        return None, out, err or ""


# MPICH's shared-memory bootstrap creates /dev/shm/mpich_shm_<pid in hex>_<n> with O_EXCL and
# unlinks it once every local rank has attached it: a rank killed before that (a timeout, an
# abort, a fault test) leaves the file behind, owned by whoever ran the tests.  A later process
# of another user whose pid is that number then fails MPI_Init ("Out of memory" in
# MPIDI_POSIX_comm_bootstrap: the sticky /dev/shm forbids it to replace root's file), which is
# how test_cluster's unprivileged run failed once in CI.  The tests remove what they leaked.
_SHM = Path("/dev/shm")
_SHM_NAME = re.compile(r"mpich_shm_([0-9a-f]+)_\d+$")
_SESSION_START = time.time()


def _held_shm_files() -> set[str]:
    """/dev/shm paths some live process has open or mapped (from /proc)."""
    held: set[str] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                held.update(ln.split(None, 5)[5].strip() for ln in f if "/dev/shm/" in ln)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/shm/"):
                    held.add(target)
        except (OSError, IndexError):
            continue
    return held


def host_shm_files() -> set[str]:
    """The shared-memory files of MPI and lpmpi in the host's /dev/shm (the box's runs must leave
    none: each node has its own /dev/shm, lpmpi.cluster)."""
    try:
        return {e.name for e in os.scandir(_SHM) if _SHM_NAME.match(e.name) or e.name.startswith("lpmpi-")}
    except OSError:
        return set()


def reap_leaked_mpich_shm() -> int:
    """Remove the MPICH bootstrap files this test session leaked: created since it started, by
    this user, and held (open or mapped) by no live process.  Returns how many were removed."""
    try:
        entries = list(os.scandir(_SHM))
    except OSError:
        return 0
    leaked = []
    for e in entries:
        if not _SHM_NAME.match(e.name):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == os.getuid() and st.st_mtime >= _SESSION_START - 1:
            leaked.append(e.path)
    if not leaked:
        return 0
    held = _held_shm_files()
    removed = 0
    for path in leaked:
        if path in held:
            continue
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed


def format_failure(cmd, env_extra, rc, out, timeout) -> str:
    lines = out.splitlines()
    fails = [ln for ln in lines if ln.startswith("FAIL ")]
    envs = " ".join(f"{k}={v}" for k, v in (env_extra or {}).items())
    head = (f"{envs + ' ' if envs else ''}{' '.join(cmd)}\n"
            + (f"TIMED OUT after {timeout}s (process group killed)" if rc is None
               else f"exit status {rc}"))
    parts = [head]
    if fails:
        shown = fails[:60]
        parts.append(f"{len(fails)} FAIL lines (first {len(shown)}):\n" + "\n".join(shown))
        first = fails[0].split(" case=", 1)[-1].split(": ", 1)[0]
        if first and not first.startswith("FAIL"):
            rerun = [c for c in cmd if c != "-u"]
            if "--stride" in rerun:
                i = rerun.index("--stride")
                del rerun[i:i + 2]
            pattern = re.sub(r"([\\()\[\]{}.*+?^$|])", r"\\\1", first).replace("'", ".")
            parts.append("rerun one case: " + (envs + " " if envs else "") + " ".join(rerun)
                         + " --filter '^" + pattern + "$'")
    rest = [ln for ln in lines if not ln.startswith("FAIL ")]
    parts.append("---- other output (tail) ----\n" + "\n".join(rest[-60:]))
    return "\n\n".join(parts)


def run_suite(suite: str, nprocs: int, *args: str, env: dict | None = None,
              timeout: float = 240) -> str:
    """Spawn ``mpiexec -n nprocs python tests/mpi_cases.py suite args`` and assert success.
    Returns the output."""
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(CASES), suite, *args]
    rc, out, _secs = run(cmd, child_env(env), timeout)
    if rc != 0:
        pytest.fail(format_failure(cmd, env, rc, out, timeout), pytrace=False)
    summary = [ln for ln in out.splitlines() if ln.startswith("SUMMARY")]
    assert summary, f"no SUMMARY line in output:\n{out[-4000:]}"
    return out


def stride_for(nprocs: int, base: dict | None = None) -> str:
    """--stride value for a process count (P >= 3 oversubscribe the 2-core machine)."""
    table = base or {1: 1, 2: 1, 3: 1, 4: 2, 5: 3}
    return str(table.get(nprocs, 10))
