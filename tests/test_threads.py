"""Threads (mpi4py initialises MPI_THREAD_MULTIPLE): collectives from several threads on
different communicators are correct, the first native calls that register lpmpi's user ops
included (they raced before); two threads on one communicator get a clear error instead of
sharing its scratch space."""
import os
import signal
import subprocess
import sys
import time

import pytest
from _mpi import TESTS, child_env, mpiexec, reap_leaked_mpich_shm, run

pytestmark = pytest.mark.mpi

TWO_COMMS = r"""
import sys, threading
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
for rep in range(5):
    comms = [w.Dup() for _ in range(4)]
    ok = [None] * 4
    def work(i):
        c = comms[i]
        n = 1000 + 17 * i
        if i % 2 == 0:     # float16 SUM and float32 MAX: lpmpi's user ops with native
            x = np.full(n, w.rank + 1, np.float16)
            r = lpmpi.allreduce(x, op="sum", comm=c, algorithm="native" if i == 0 else "lp")
            ok[i] = bool((r == sum(range(1, w.size + 1))).all())
        else:
            x = np.arange(n, dtype=np.float32) * (w.rank + 1)
            r = lpmpi.allreduce(x, op="max", comm=c, algorithm="native" if i == 1 else "ring")
            ok[i] = bool((r == np.arange(n, dtype=np.float32) * w.size).all())
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert all(ok), (rep, ok)
    for c in comms:
        c.Free()
sys.stdout.write(f"RANK{w.rank} ok\n")
"""

ONE_COMM = r"""
import sys, threading, time
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
c = w.Dup()
lpmpi.allreduce(np.ones(4), comm=c)                   # context ready
big = np.ones(32 << 20)                                # 256 MiB: a call of 0.1 s or more
started = threading.Event()
errors = []
def long_call():
    started.set()
    lpmpi.allreduce(lpmpi.IN_PLACE, big, comm=c, algorithm="lp")
def second_call():
    started.wait()
    time.sleep(0.02)
    try:
        lpmpi.allreduce(np.ones(8), comm=c)
    except lpmpi.LPError as e:
        errors.append(str(e))
a = threading.Thread(target=long_call); b = threading.Thread(target=second_call)
a.start(); b.start(); a.join(); b.join()
assert (big == w.size).all()
y = lpmpi.allreduce(np.ones(3), comm=c)                # still usable afterwards
assert (y == w.size).all()
sys.stdout.write(f"RANK{w.rank} " + ("|".join(errors) or "no error") + "\n")
"""


def _spawn(tmp_path, code, n=2, timeout=120):
    script = tmp_path / "threads.py"
    script.write_text(code)
    rc, out, _ = run([mpiexec(), "-n", str(n), sys.executable, str(script)], child_env(), timeout)
    assert rc == 0, f"exit status {rc} ({'timed out' if rc is None else 'failed'}):\n{out[-6000:]}"
    return out


@pytest.mark.parametrize("attempt", range(3))
def test_threads_on_different_communicators(tmp_path, attempt):
    out = _spawn(tmp_path, TWO_COMMS)
    assert out.count(" ok") == 2, out


def test_two_threads_on_one_communicator_raise(tmp_path):
    out = _spawn(tmp_path, ONE_COMM)
    lines = [ln for ln in out.splitlines() if ln.startswith("RANK")]
    assert len(lines) == 2, out
    for ln in lines:
        assert "another thread is running a collective on this communicator" in ln, out


@pytest.mark.stress
def test_concurrent_first_calls_500_runs_in_a_row(tmp_path):
    """The hang of issue 41: four threads making their first lpmpi calls on four new
    communicators at once hung about once in 1000 runs (MPICH's nonblocking context-id agreement
    of the first call's MPI_Comm_idup beside another thread's blocking MPI_Comm_split_type,
    livelocked on both ranks).  LPMPI_STRESS_RUNS runs (default 500) in a row, each within 60 s;
    a run that hangs has every rank's flight recorder dumped (SIGUSR1) and its Python stacks
    (py-spy, where installed) in the failure.  LPMPI_TESTS=stress runs it (~4 min)."""
    script = tmp_path / "threads.py"
    script.write_text(TWO_COMMS)
    runs = int(os.environ.get("LPMPI_STRESS_RUNS", "500"))
    fr = tmp_path / "fr"
    env = child_env({"LPMPI_FR_DIR": fr})
    t0 = time.monotonic()
    for i in range(runs):
        p = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, str(script)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            ranks = subprocess.run(["pgrep", "-f", f"python.* {script}"], capture_output=True, text=True,
                                   check=False).stdout.split()
            stacks, spy_bin = "", _which("py-spy")
            for pid in ranks:
                os.kill(int(pid), signal.SIGUSR1)
                spy = subprocess.run([spy_bin, "dump", "--native", "--pid", pid], capture_output=True,
                                     text=True, check=False, timeout=60) if spy_bin else None
                stacks += f"--- rank process {pid}\n" + (spy.stdout if spy else "(py-spy not installed)\n")
            time.sleep(2)
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            reap_leaked_mpich_shm()
            hang = subprocess.run([sys.executable, "-m", "lpmpi.trace", "--hang", str(fr)], capture_output=True,
                                  text=True, check=False, env=env, cwd=str(TESTS)).stdout
            pytest.fail(f"run {i + 1} of {runs} hung\n{out[-3000:]}\n{hang}\n{stacks[-20000:]}")
        assert p.returncode == 0 and out.count(" ok") == 2, f"run {i + 1}: {out[-3000:]}"
        if (i + 1) % 100 == 0:
            print(f"{i + 1} runs in a row, {time.monotonic() - t0:.0f} s", flush=True)


def _which(name):
    import shutil

    return shutil.which(name) or shutil.which(os.path.join(os.path.dirname(sys.executable), name))
