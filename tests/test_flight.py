"""The flight recorder, the trace and lpmpi-trace (issue 41).

- A rank that skips the k-th collective, the others stuck in it: SIGUSR1 dumps every rank's
  recorder (also a rank stuck inside MPI or asleep in Python), and ``lpmpi-trace --hang`` names
  collective k, its sequence number and the rank that never reached it; a rank that left no
  dump is named as such.
- A rank late for the k-th collective with LPMPI_TIMEOUT: the watchdog dumps on both ranks, and
  ``--hang`` names the late rank from the dumps' clocks.
- LPMPI_TRACE: every call appears once per rank, with the same sequence numbers and collectives
  on every rank; the files load as JSON; a job killed mid-run leaves ``.bin`` files that
  ``lpmpi-trace`` converts (bounded loss); the summary and the picture.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _mpi import TESTS, child_env, mpiexec, reap_leaked_mpich_shm

pytestmark = pytest.mark.mpi

K = 7          # the collective the scenario's rank misses


def _spawn(script: Path, n: int, env: dict) -> subprocess.Popen:
    return subprocess.Popen([mpiexec(), "-n", str(n), sys.executable, str(script)], env=child_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, text=True)


def _kill(proc: subprocess.Popen) -> str:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    out, _ = proc.communicate(timeout=30)
    reap_leaked_mpich_shm()
    return out or ""


def _wait_for(paths, proc, timeout=60.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all(Path(p).exists() for p in paths):
            return True
        if proc.poll() is not None:
            return all(Path(p).exists() for p in paths)
        time.sleep(0.1)
    return False


def _trace_cli(*args):
    # (cwd: tests/, as run_split's: `python -m` puts the working directory first, and the
    # repository root holds the unbuilt source tree)
    r = subprocess.run([sys.executable, "-m", "lpmpi.trace", *map(str, args)], env=child_env(),
                       capture_output=True, text=True, timeout=120, cwd=str(TESTS), check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


SKIP = r"""
import os, sys, time
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
skip = int(os.environ["SKIP_RANK"])
x = np.ones(1024, np.float32)
for i in range(1, {K}):
    lpmpi.allreduce(x, algorithm=os.environ.get("ALG", "auto"))
open(os.path.join(os.environ["READY"], f"ready.{{w.rank}}"), "w").write(str(os.getpid()))
if w.rank == skip:
    time.sleep(300)            # skips collective #{K}
lpmpi.allreduce(np.ones(4096, np.float32), algorithm=os.environ.get("ALG", "auto"))
""".replace("{K}", str(K)).replace("{{", "{").replace("}}", "}")


@pytest.mark.parametrize("n,alg,signalled", [(2, "ring", (0, 1)), (3, "native", (0, 1, 2)), (3, "lp", (0, 2))],
                         ids=["P2-ring", "P3-native", "P3-lp-one-dead"])
def test_sigusr1_dumps_name_the_rank_that_skipped(tmp_path, n, alg, signalled):
    skip = 1
    script = tmp_path / "skip.py"
    script.write_text(SKIP)
    fr, ready = tmp_path / "fr", tmp_path / "ready"
    ready.mkdir()
    proc = _spawn(script, n, {"LPMPI_FR_DIR": fr, "READY": ready, "SKIP_RANK": skip, "ALG": alg})
    try:
        assert _wait_for([ready / f"ready.{r}" for r in range(n)], proc), _kill(proc)
        time.sleep(1.0)                       # the others inside #K (MPI's own: inside MPI)
        pids = {r: int((ready / f"ready.{r}").read_text()) for r in range(n)}
        for r in signalled:
            os.kill(pids[r], signal.SIGUSR1)
        assert _wait_for([fr / f"fr.{r}.json" for r in signalled], proc, 30), _kill(proc)
    finally:
        out = _kill(proc)
    for r in signalled:
        d = json.loads((fr / f"fr.{r}.json").read_text())
        assert d["reason"] == "SIGUSR1" and d["rank"] == r and d["world_size"] == n
        seqs = [e["seq"] for e in d["entries"] if e["comm"] == d["comms"][0]["id"]]
        assert seqs == list(range(1, K + (r != skip))), (r, seqs)
    report = _trace_cli("--hang", fr)
    assert f"the ranks diverge at collective #{K}: allreduce of 16384 B" in report, report + out
    dead = [r for r in range(n) if r not in signalled]
    if skip in signalled:
        assert f"=> rank {skip} never reached collective #{K} (allreduce)" in report, report
        assert f"rank {skip}: never reached #{K} (its last: #{K - 1} allreduce, done)" in report, report
    for r in dead:
        assert f"rank {r} left no dump: dead" in report, report
    waiting = [r for r in signalled if r != skip]
    for r in waiting:
        line = next(ln for ln in report.splitlines() if ln.startswith(f"  rank {r}: in #{K}"))
        if alg == "native":
            assert "inside MPI's own collective" in line, report
        else:
            assert "waiting for rank(s)" in line, report


LATE = r"""
import os, sys, time
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
fr = os.environ["LPMPI_FR_DIR"]
x = np.ones(1024, np.float32)
for i in range(1, {K}):
    lpmpi.allreduce(x, algorithm="ring")
if w.rank == 1:
    time.sleep(4)              # late for #{K}: rank 0's watchdog fires first
try:
    lpmpi.allreduce(np.ones(4096, np.float32), algorithm="ring")
except lpmpi.LPError as e:
    print(f"RANK{{w.rank}} {{e}}", flush=True)
for _ in range(300):           # until both dumps exist; then leave without MPI_Finalize
    if all(os.path.exists(os.path.join(fr, f"fr.{{r}}.json")) for r in range(w.size)):
        break
    time.sleep(0.1)
os._exit(0)
""".replace("{K}", str(K)).replace("{{", "{").replace("}}", "}")


def test_watchdog_dumps_name_the_late_rank(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(LATE)
    fr = tmp_path / "fr"
    proc = _spawn(script, 2, {"LPMPI_FR_DIR": fr, "LPMPI_TIMEOUT": "1.5"})
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        out = _kill(proc)
        pytest.fail(out)
    assert out.count("LPMPI_TIMEOUT") == 2 and f"flight recorder written to {fr}" in out, out
    for r in range(2):
        assert json.loads((fr / f"fr.{r}.json").read_text())["reason"] == "watchdog (LPMPI_TIMEOUT)"
    report = _trace_cli("--hang", fr)
    assert f"the ranks diverge at collective #{K}: allreduce" in report, report
    assert f"rank 1: late for #{K}" in report, report
    assert f"=> rank 1 late for collective #{K} (allreduce)" in report, report


def test_dump_flight_recorder_in_a_program(tmp_path):
    """lpmpi.dump_flight_recorder(): the calls of every form with their decisions, oldest first."""
    script = tmp_path / "dump.py"
    script.write_text(textwrap.dedent(r"""
        import os, sys, json
        import numpy as np, lpmpi
        from mpi4py import MPI
        w = MPI.COMM_WORLD
        c = w.Dup()
        lpmpi.allreduce(np.ones(8, np.float32))
        lpmpi.bcast(np.ones(100, np.float64), root=1, comm=c)
        lpmpi.iallreduce(np.ones(1 << 16, np.float32), algorithm="lp").wait()
        p = lpmpi.allreduce_init(np.ones(64, np.int32), algorithm="ring")
        for _ in range(2):
            p.start(); p.wait()
        lpmpi.allreduce(np.ones(1000, np.float32), compression="int8")
        path = lpmpi.dump_flight_recorder(sys.argv[1])
        d = json.load(open(path))
        rows = [(e["seq"], e["collective"], e["form"], e["state"], e["algorithm"], e["bytes"],
                 e["compression"]) for e in d["entries"]]
        with open(os.path.join(sys.argv[1], f"rows.{w.rank}"), "w") as f:
            json.dump({"rows": rows, "comms": [c["world_ranks"] for c in d["comms"]]}, f)
        """))
    rc = subprocess.run([mpiexec(), "-n", "2", sys.executable, str(script), str(tmp_path / "fr")],
                        env=child_env(), capture_output=True, text=True, timeout=120, check=False)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    for r in range(2):
        got = json.loads((tmp_path / "fr" / f"rows.{r}").read_text())
        e, comms = got["rows"], got["comms"]
        assert [x[:4] for x in e] == [[1, "allreduce", "blocking", "done"], [1, "bcast", "blocking", "done"],
                                      [2, "allreduce", "nonblocking", "done"],
                                      [3, "allreduce", "persistent", "done"],
                                      [4, "allreduce", "persistent", "done"],
                                      [5, "allreduce", "blocking", "done"]], e
        assert e[2][4] == "lp" and e[3][4] == "ring" and e[2][5] == 4 << 16
        assert [x[6] for x in e] == ["none"] * 5 + ["int8"] and e[5][4] == "direct", e
        assert comms == [[0, 1], [0, 1]]


TRACED = r"""
import os, sys
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
c = w.Dup()
n = int(sys.argv[1])
for i in range(n):
    lpmpi.allreduce(np.ones(1 + i % 300, np.float32))
    lpmpi.bcast(np.ones(64, np.float64), root=i % w.size, comm=c)
r = lpmpi.iallreduce(np.ones(1 << 16, np.float32), comm=c)
r.wait()
g = lpmpi.allgather(np.ones(10, np.int32))
v = lpmpi.reduce_scatter(np.ones(3 * w.size, np.float32), op="max", counts=[3] * w.size)
p = lpmpi.allreduce_init(np.ones(1024, np.float32), compression="bf16")
for _ in range(3):
    p.start(); p.wait()
if os.environ.get("FOREVER"):
    open(os.path.join(os.environ["READY"], f"ready.{w.rank}"), "w").write("1")
    x = np.ones(2, np.float32)
    while True:
        lpmpi.allreduce(x)
"""


@pytest.mark.parametrize("n", [2, 3], ids=lambda n: f"P{n}")
def test_trace_has_every_call_once_per_rank(tmp_path, n):
    script = tmp_path / "traced.py"
    script.write_text(TRACED)
    tr = tmp_path / "trace"
    calls = 200
    rc = subprocess.run([mpiexec(), "-n", str(n), sys.executable, str(script), str(calls)],
                        env=child_env({"LPMPI_TRACE": tr}), capture_output=True, text=True, timeout=180, check=False)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    assert sorted(p.name for p in tr.iterdir()) == sorted(f"trace.{r}.json" for r in range(n))
    per_rank = {}
    for r in range(n):
        ev = json.loads((tr / f"trace.{r}.json").read_text())     # plain JSON
        cs = [e for e in ev if e.get("cat") == "collective"]
        assert all(e["ph"] == "X" and e["pid"] == r and e["dur"] >= 0 for e in cs)
        per_rank[r] = {(e["args"]["comm"], e["args"]["seq"]): (e["name"], e["args"]["bytes"], e["args"]["form"])
                       for e in cs}
        comp = [(e["args"]["form"], e["args"].get("compression")) for e in cs if "compression" in e["args"]]
        assert comp == [("persistent", "bf16")] * 3, comp         # the compressed calls, recorded
        assert len(per_rank[r]) == len(cs) == 2 * calls + 1 + 1 + 1 + 3       # each call once
        ops = {e["name"]: e["args"].get("op") for e in cs}   # every reducing call names its op
        assert ops["reduce_scatter_v"] == "max" and ops["allreduce"] == "sum" and ops["bcast"] is None, ops
        for comm in {k[0] for k in per_rank[r]}:
            seqs = sorted(s for c, s in per_rank[r] if c == comm)
            assert seqs == list(range(1, len(seqs) + 1)), (comm, seqs[:5])
        assert any(e.get("cat") == "phase" for e in ev)                      # nested phases (sampled)
    assert all(per_rank[r] == per_rank[0] for r in range(n))               # the same on every rank
    out = _trace_cli(tr)
    assert f"{n} rank(s), {2 * calls + 6} calls" in out, out
    assert "allreduce" in out and "bcast" in out and "latest to arrive: rank" in out, out
    merged = json.loads((tr / "trace.json").read_text())
    assert len([e for e in merged if e.get("cat") == "collective"]) == n * (2 * calls + 6)
    png = tr / "trace.png"          # (matplotlib: the [examples] extra; the test extras lack it)
    assert (png.exists() and png.stat().st_size > 10000) or "matplotlib is not installed" in out, out


def test_trace_of_a_killed_job_is_recovered(tmp_path):
    """SIGKILL mid-run: the .bin files hold all but the last unwritten buffer (256 records at
    most); lpmpi-trace converts them to JSON that loads, each rank's calls numbered from 1 without a
    gap up to LPMPI_TRACE_MAX, then one in 100."""
    script = tmp_path / "traced.py"
    script.write_text(TRACED)
    tr, ready = tmp_path / "trace", tmp_path / "ready"
    ready.mkdir()
    proc = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, str(script), "5"],
                            env=child_env({"LPMPI_TRACE": tr, "FOREVER": "1", "READY": ready,
                                           "LPMPI_TRACE_MAX": "1000"}),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, text=True)
    try:
        assert _wait_for([ready / "ready.0", ready / "ready.1"], proc), _kill(proc)
        time.sleep(2.0)
    finally:
        _kill(proc)
    assert sorted(p.name for p in tr.iterdir()) == ["trace.0.bin", "trace.1.bin"]
    out = _trace_cli(tr, "--png", "none")
    assert "2 rank(s)" in out, out
    counts = []
    for r in range(2):
        ev = json.loads((tr / f"trace.{r}.json").read_text())
        world = sorted(e["args"]["seq"] for e in ev if e.get("cat") == "collective" and e["args"]["comm"] == "w0.1")
        full = [s for s in world if s <= 900]
        assert full == list(range(1, 901)), full[:10]            # every call up to LPMPI_TRACE_MAX
        rest = [s for s in world if s > 1000]
        assert rest and all(s % 100 == 0 for s in rest), rest[:10]   # then one in 100
        counts.append(max(world))
    assert abs(counts[0] - counts[1]) <= 256 * 100, counts


@pytest.mark.parametrize("alg", ["native", "ring"])
def test_abort_timeout_ends_a_hung_job_with_a_dump(tmp_path, alg):
    """LPMPI_ABORT_TIMEOUT (default 1800 s; 2 s here): rank 0 stuck in collective #K (inside MPI's
    own blocking allreduce for "native") while rank 1 sleeps: the watch thread dumps, says what
    #K waits for and aborts the job, which ends instead of hanging."""
    script = tmp_path / "skip.py"
    script.write_text(SKIP)
    fr, ready = tmp_path / "fr", tmp_path / "ready"
    ready.mkdir()
    t0 = time.monotonic()
    proc = _spawn(script, 2, {"LPMPI_FR_DIR": fr, "READY": ready, "SKIP_RANK": 1, "ALG": alg,
                              "LPMPI_ABORT_TIMEOUT": "2"})
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("the job did not end: " + _kill(proc))
    reap_leaked_mpich_shm()
    assert proc.returncode != 0 and time.monotonic() - t0 < 60, out
    assert f"LPMPI_ABORT_TIMEOUT: allreduce #{K} (16384 bytes)" in out and "aborting the job" in out, out
    # (ring: its peer's rank, or the node-local transport's counters it polls)
    assert ("inside MPI's own collective" if alg == "native" else "waiting for") in out, out
    d = json.loads((fr / "fr.0.json").read_text())
    assert d["reason"] == "watchdog (LPMPI_ABORT_TIMEOUT)" and d["entries"][-1]["state"] == "started", d
    report = _trace_cli("--hang", fr)
    assert "rank 1 left no dump" in report and f"diverge at collective #{K}" in report, report
