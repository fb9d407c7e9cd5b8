"""The defects fault injection found (issue 25), each reproducer turned into a test that spawns
``mpiexec`` with a hard timeout:

1. LPMPI_CHECK checks persistent ``start()``: started in different orders, every rank raises
   MismatchError naming the requests;
2. torch tensors whose negative or conjugate bit is set are refused (DLPack drops the bit);
3. knobs that change what a rank sends, set on one rank only, raise MismatchError on every
   rank naming the variable (they used to give a wrong result or hang);
4. lpmpi.torch refuses a communicator that is not torch's world (torchrun's singletons);
5. the shared-memory transport notices a dead peer and raises on the survivor;
6. a forked child exits at once and its parent goes on;
7. MPI's collectives of outstanding requests are issued in the same order on every rank
   (device memory's staged path waited in any order; blocking calls among nonblocking ones);
8. LPMPI_TIMEOUT: a collective one rank never enters raises on the others;
9. no shared-memory segment survives a kill -9.
"""
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest
from _mpi import child_env, mpiexec, run

pytestmark = pytest.mark.mpi


def launch(tmp_path, code, n=2, env=None, timeout=120, mpmd_env=None, args=(), name="case.py"):
    """Run `code` under mpiexec (hard timeout); returns (returncode or None, output, seconds)."""
    script = tmp_path / name
    script.write_text(textwrap.dedent(code))
    if mpmd_env:
        cmd = [mpiexec(), *args]
        for i, e in enumerate(mpmd_env):
            cmd += ([":"] if i else []) + ["-n", "1"]
            for k, v in e.items():
                cmd += ["-env", k, str(v)]
            cmd += [sys.executable, str(script)]
    else:
        cmd = [mpiexec(), *args, "-n", str(n), sys.executable, str(script)]
    return run(cmd, child_env(env), timeout)


def ok(rc, out):
    assert rc == 0, f"exit status {rc} ({'timed out' if rc is None else 'failed'}):\n{out[-6000:]}"


# ------------------------------------------------------------------ 1. persistent start, checked
@pytest.mark.parametrize("nbytes", [32, 4096, 1 << 20])
def test_check_covers_persistent_start(tmp_path, nbytes):
    rc, out, _ = launch(tmp_path, f"""
    import numpy as np, lpmpi
    from lpmpi import MismatchError
    from mpi4py import MPI
    me = MPI.COMM_WORLD.Get_rank()
    n = {nbytes} // 8
    a, b = np.ones(n), np.full(n, 100.0)
    ra, rb = np.zeros(n), np.zeros(n)
    A, B = lpmpi.allreduce_init(a, ra), lpmpi.allreduce_init(b, rb)
    for q in (A, B):                       # the same order: right results
        q.start()
    for q in (A, B):
        q.wait()
    assert ra[0] == 2.0 and rb[0] == 200.0, (ra[0], rb[0])
    first, second = (A, B) if me == 0 else (B, A)
    try:
        first.start()
        print("NOT RAISED", me, flush=True)
    except MismatchError as e:
        assert "persistent request" in str(e) and "#1 on rank 0" in str(e), e
        print("RAISED", me, flush=True)
    A.start(); B.start(); A.wait(); B.wait()      # still usable, in one order
    assert ra[0] == 2.0 and rb[0] == 200.0
    """, env={"LPMPI_CHECK": "1"})
    ok(rc, out)
    assert out.count("RAISED") == 2 and "NOT RAISED" not in out, out


# ------------------------------------------------------------------ 2. torch's lazy bits
def test_torch_negative_and_conjugate_bits_refused():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'lpmpi[torch]')")
    import lpmpi
    neg = torch._neg_view(torch.tensor([2.0]))
    with pytest.raises(TypeError, match="negative bit.*resolve_neg"):
        lpmpi.allreduce(neg)
    out = torch.zeros(1)
    with pytest.raises(TypeError, match="recvbuf.*negative bit"):
        lpmpi.allreduce(torch.tensor([1.0]), torch._neg_view(out))
    assert out.item() == 0.0                        # nothing written
    z = torch.tensor([1 + 2j])
    with pytest.raises(TypeError, match="sendbuf.*(conjugate bit|negative bit)"):
        lpmpi.allreduce(z.conj().imag)
    with pytest.raises(TypeError, match="conjugate bit.*resolve_conj"):
        lpmpi.allreduce(z.conj())
    assert lpmpi.allreduce(neg.resolve_neg()).item() == -2.0


# ------------------------------------------------------------------ 3. knobs on one rank
@pytest.mark.parametrize("var,value,named", [
    ("LPMPI_CHUNK_BYTES", "8K", "LPMPI_CHUNK_BYTES (allreduce): 8192 on rank 0, unset on rank 1"),
    ("LPMPI_ALGORITHM", "lp", "LPMPI_ALGORITHM (allreduce): lp on rank 0, unset on rank 1"),
    ("LPMPI_CHECK", "1", "LPMPI_CHECK: 1 on rank 0, 0 on rank 1"),
    ("LPMPI_MAX_MSG_BYTES", "4K", "LPMPI_MAX_MSG_BYTES: 4096 on rank 0"),
    ("LPMPI_TIMEOUT", "30", "LPMPI_TIMEOUT: 30 s on rank 0, off on rank 1"),
    ("LPMPI_AUTOTUNE", "1", "LPMPI_AUTOTUNE: 1 on rank 0, 0 on rank 1"),
])
def test_knob_on_one_rank_raises_everywhere(tmp_path, var, value, named):
    rc, out, _ = launch(tmp_path, """
    import numpy as np, lpmpi
    from lpmpi import MismatchError
    from mpi4py import MPI
    me = MPI.COMM_WORLD.Get_rank()
    x = np.arange(100000, dtype=np.float32)
    for attempt in range(2):                       # every call, not only the first
        try:
            lpmpi.allreduce(x)
            print("NOT RAISED", me, flush=True)
        except MismatchError as e:
            print("RAISED", me, e, flush=True)
    """, mpmd_env=[{var: value}, {}])
    ok(rc, out)
    assert out.count("RAISED") == 4 and "NOT RAISED" not in out, out
    assert named in out, out


# ------------------------------------------------------------------ 4. torchrun
def test_torch_hook_refuses_a_world_that_is_not_mpis(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (pip install 'lpmpi[torch]')")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
    import os, torch, torch.distributed as dist
    import lpmpi, lpmpi.torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    m = DDP(torch.nn.Linear(2, 1, bias=False))
    for make in (lambda: None, lpmpi.torch.HookState):
        try:
            m.register_comm_hook(make(), lpmpi.torch.allreduce_hook)
            m(torch.ones(1, 2)).sum().backward()
            print("NOT REFUSED", dist.get_rank(), flush=True)
        except RuntimeError as e:
            print("REFUSED", dist.get_rank(), e, flush=True)
        m = DDP(torch.nn.Linear(2, 1, bias=False))
    del m                                  # before its process group goes
    dist.destroy_process_group()
    os._exit(0)                            # (torch's threads at interpreter exit can abort it)
    """))
    env = child_env({"MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"})
    rc, out, _ = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                      "--master_port", str(29500 + os.getpid() % 400), str(script)], env, 180)
    ok(rc, out)
    assert out.count("REFUSED") == 4 and "NOT REFUSED" not in out, out
    assert "torchrun makes each one an MPI singleton" in out and "mpiexec -n 2" in out, out


# ------------------------------------------------------------------ 5. a dead peer
DEAD_PEER = """
import lpmpi.engine, numpy as np, lpmpi, os, signal, sys, time
from mpi4py import MPI
w = MPI.COMM_WORLD; me = w.Get_rank()
lpmpi.engine.set_transport("shm")
x = np.ones({n} // 4, dtype=np.float32)
for i in range(3):
    assert lpmpi.allreduce(x, algorithm="ring")[0] == 2
assert lpmpi._core.ring_transport(w, x.nbytes) == "shm", lpmpi._core.ring_transport(w, x.nbytes)
w.Barrier()
if me == 1:
    {death}
t = time.monotonic()
try:
    for i in range(10**6):
        lpmpi.allreduce(x, algorithm="ring")
    res = "NOT RAISED"
except lpmpi.LPError as e:
    res = f"RAISED {{time.monotonic() - t:.2f}} {{e}}"
open(os.environ["OUT"], "w").write(res)
print(res, flush=True)
os._exit(0)
"""


@pytest.mark.parametrize("nbytes", [8192, 64 << 20], ids=["8KiB", "64MiB"])
def test_shm_survivor_raises_when_its_peer_exits(tmp_path, nbytes):
    """The peer leaves abruptly (no MPI_Finalize) in the middle of shared-memory rounds."""
    out_file = tmp_path / "survivor.txt"
    rc, out, _ = launch(tmp_path, DEAD_PEER.format(n=nbytes, death="os._exit(3)"),
                        args=("-disable-auto-cleanup",), env={"OUT": out_file}, timeout=60)
    assert rc is not None, f"hung:\n{out[-4000:]}"
    res = out_file.read_text() if out_file.exists() else ""
    m = re.match(r"RAISED (\S+) (.*)", res)
    assert m, out[-4000:]
    assert float(m.group(1)) < 10 and "rank 1" in m.group(2) and "is gone" in m.group(2), res


def test_shm_survivor_of_a_kill_9_never_hangs(tmp_path):
    """kill -9 of the peer: hydra itself kills the survivor in some launches (plain mpi4py too,
    even with -disable-auto-cleanup); where the survivor lives, it raises within 10 s, and no
    launch hangs."""
    raised = 0
    for i in range(4):
        out_file = tmp_path / f"survivor{i}.txt"
        rc, out, _ = launch(tmp_path, DEAD_PEER.format(n=64 << 20, death="os.kill(os.getpid(), signal.SIGKILL)"),
                            args=("-disable-auto-cleanup",), env={"OUT": out_file}, timeout=60)
        assert rc is not None, f"hung:\n{out[-4000:]}"
        if out_file.exists():
            m = re.match(r"RAISED (\S+)", out_file.read_text())
            assert m and float(m.group(1)) < 10, out_file.read_text()
            raised += 1
    print(f"survivor lived to raise in {raised} of 4 launches")


# ------------------------------------------------------------------ 6. fork
@pytest.mark.parametrize("transport", ["cma", "shm", "mpi"])
def test_forked_child_exits_and_the_parent_goes_on(tmp_path, transport):
    rc, out, _ = launch(tmp_path, """
    import numpy as np, lpmpi, os, sys, time
    from mpi4py import MPI
    me = MPI.COMM_WORLD.Get_rank()
    x = np.ones(1 << 18, dtype=np.float32)
    req = lpmpi.iallreduce(x, algorithm="ring")        # in flight when the process forks
    t = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            lpmpi.allreduce(x)
            print("CHILD COMMUNICATED", flush=True)
        except lpmpi.LPError as e:
            assert "forked child" in str(e), e
        try:
            req.wait()                 # complete before the fork: its result; else refused
        except lpmpi.LPError as e:
            assert "forked" in str(e), e
        # a normal exit: atexit handlers and MPI_Finalize run in the child.  (MPICH's
        # MPI_Finalize in a forked child also breaks the parent's PMI connection, plain mpi4py
        # alike: the parent leaves with os._exit below.)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    dt = time.monotonic() - t
    assert status == 0 and dt < 5, (status, dt)
    assert np.array_equal(req.wait(), 2 * x)
    for i in range(20):
        assert np.array_equal(lpmpi.allreduce(x), 2 * x)
    print("PARENT OK", me, f"{dt:.2f}", flush=True)
    MPI.COMM_WORLD.Barrier()
    os._exit(0)
    """, env={"LPMPI_NODE_TRANSPORT": transport, "LPMPI_PROGRESS_THREAD": "1"}, timeout=90)
    assert rc is not None, f"hung:\n{out[-4000:]}"
    assert out.count("PARENT OK") == 2 and "CHILD" not in out, out[-4000:]


# ------------------------------------------------------------------ 7. MPI's collective order
@pytest.mark.parametrize("nprocs", [2, 3])
def test_staged_requests_waited_in_any_order(tmp_path, nprocs):
    """Nonblocking requests on device memory (the emulated staged path: native's MPI collective
    is issued after a staging copy) on two communicators, waited in each rank's own order."""
    rc, out, _ = launch(tmp_path, """
    import numpy as np, lpmpi, random
    from mpi4py import MPI
    w = MPI.COMM_WORLD; P, me = w.Get_size(), w.Get_rank()
    algs = lpmpi.algorithms("allreduce")
    d = w.Dup()
    for rnd in range(3):
        reqs, exp = [], []
        for i in range(10):
            comm = (w, d)[i % 2]
            x = (np.arange(1000) % 97 + me + i).astype(np.float64)
            reqs.append(lpmpi.iallreduce(x, comm=comm, algorithm=algs[i % len(algs)], chunk_bytes=256))
            exp.append(sum((np.arange(1000) % 97 + r + i) for r in range(P)).astype(np.float64))
            if i % 4 == 3:                         # a blocking call among them
                assert lpmpi.allreduce(np.ones(7), comm=comm, algorithm="native")[0] == P
        for i in random.Random(me * 31 + rnd).sample(range(10), 10):
            assert np.array_equal(reqs[i].wait(), exp[i]), i
    print("OK", me, flush=True)
    """, n=nprocs, env={"LPMPI_EMULATE_STAGING": "1"}, timeout=180)
    ok(rc, out)
    assert out.count("OK") == nprocs, out


def test_blocking_and_nonblocking_native_match_whatever_is_in_flight(tmp_path):
    """MPI never matches a blocking collective with a nonblocking one: a blocking native call
    must take the same form on every rank, whatever each rank still has in flight (here rank 1
    has finished its nonblocking broadcast, rank 0 has not even waited for it)."""
    rc, out, _ = launch(tmp_path, """
    import numpy as np, lpmpi
    from mpi4py import MPI
    w = MPI.COMM_WORLD; me = w.Get_rank()
    d = w.Dup()
    for i in range(20):
        b = np.full(1 << 16, float(i)) if me == 1 else np.zeros(1 << 16)
        req = lpmpi.ibcast(b, root=1, comm=d, algorithm="native")
        if me == 1:
            req.wait()
        y = lpmpi.allreduce(np.ones(1000), comm=w, algorithm="native")
        z = lpmpi.allreduce(np.ones(1000), comm=d, algorithm="native")
        assert y[0] == 2 and z[0] == 2
        if me == 0:
            assert req.wait()[0] == i
    print("OK", me, flush=True)
    """, timeout=60)
    ok(rc, out)
    assert out.count("OK") == 2, out


# ------------------------------------------------------------------ 8. the watchdog
@pytest.mark.parametrize("case", ["first call", "later call", "check", "nonblocking", "shm", "native"])
def test_timeout_raises_on_the_waiting_rank(tmp_path, case):
    out_file = tmp_path / "waiter.txt"
    rc, out, _ = launch(tmp_path, f"""
    import numpy as np, lpmpi, lpmpi.engine, os, time
    from mpi4py import MPI
    w = MPI.COMM_WORLD; me = w.Get_rank()
    case = {case!r}
    x = np.ones(1 << 16 if case != "shm" else 2048, dtype=np.float32)
    alg = "native" if case == "native" else "ring" if case == "shm" else "auto"
    if case == "shm":
        lpmpi.engine.set_transport("shm")
    if case != "first call":
        lpmpi.allreduce(x, algorithm=alg)
    if me == 1:
        time.sleep(25)                     # never enters the collective in time
        os._exit(0)
    t = time.monotonic()
    try:
        if case == "nonblocking":
            lpmpi.iallreduce(x).wait()
        else:
            lpmpi.allreduce(x, algorithm=alg)
        res = "NOT RAISED"
    except lpmpi.LPError as e:
        res = f"RAISED {{time.monotonic() - t:.2f}} {{e}}"
    open(os.environ["OUT"], "w").write(res)
    os._exit(0)
    """, env={"LPMPI_TIMEOUT": "5", "OUT": out_file, **({"LPMPI_CHECK": "1"} if case == "check" else {})},
        timeout=90)
    assert rc is not None, f"hung:\n{out[-4000:]}"
    res = out_file.read_text() if out_file.exists() else out[-3000:]
    m = re.match(r"RAISED (\S+) (.*)", res)
    assert m, res
    assert 4.5 < float(m.group(1)) < 15 and "LPMPI_TIMEOUT" in m.group(2), res
    if case in ("later call", "nonblocking"):
        assert "rank(s) 1" in m.group(2) or "MPI's own collective" in m.group(2), res
    if case == "shm":
        assert "shared-memory" in m.group(2), res


def test_timeout_off_and_on_agree_on_results(tmp_path):
    """With the watchdog on, waits poll instead of blocking in MPI: every algorithm still
    gives the right result, blocking, nonblocking and persistent."""
    rc, out, _ = launch(tmp_path, """
    import numpy as np, lpmpi
    from mpi4py import MPI
    P = MPI.COMM_WORLD.Get_size()
    for alg in lpmpi.algorithms("allreduce"):
        for n in (1, 1000, 300000):
            x = np.arange(n, dtype=np.float64)
            assert np.array_equal(lpmpi.allreduce(x, algorithm=alg), P * x), (alg, n)
            assert np.array_equal(lpmpi.iallreduce(x, algorithm=alg).wait(), P * x), (alg, n)
            p = lpmpi.allreduce_init(x, algorithm=alg)
            for i in range(3):
                assert np.array_equal(p.start().wait(), P * x), (alg, n)
    print("OK", flush=True)
    """, n=3, env={"LPMPI_TIMEOUT": "60"}, timeout=240)
    ok(rc, out)
    assert out.count("OK") == 3, out


# ------------------------------------------------------------------ 9. segments
def segments():
    d = Path("/dev/shm")
    return sorted(p.name for p in d.iterdir() if p.name.startswith("lpmpi-")) if d.is_dir() else []


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm on this system")
def test_no_segment_survives_kill_9(tmp_path):
    before = segments()
    for k in (2, 7, 15, 31):
        rc, out, _ = launch(tmp_path, f"""
        import numpy as np, lpmpi, os, signal
        from mpi4py import MPI
        w = MPI.COMM_WORLD
        x = np.ones(16384, dtype=np.float32)
        for i in range(40):
            d = w.Dup()
            lpmpi.allreduce(x, comm=d, algorithm="ring")
            d.Free()
            if i == {k} and w.Get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        """, env={"LPMPI_NODE_TRANSPORT": "shm"}, timeout=60)
        assert rc is not None, out[-3000:]
    left = [s for s in segments() if s not in before]
    assert not left, left


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm on this system")
def test_stale_segment_of_a_dead_job_is_removed(tmp_path):
    """A segment named by an earlier lpmpi whose creator is gone is removed at the next make;
    one whose creator lives (this test process) is left alone."""
    dead = Path("/dev/shm/lpmpi-4194303-0-0")        # above any pid_max Linux allows
    alive = Path(f"/dev/shm/lpmpi-{os.getpid()}-0-0")
    dead.write_bytes(b"x")
    alive.write_bytes(b"x")
    try:
        rc, out, _ = launch(tmp_path, """
        import numpy as np, lpmpi
        lpmpi.allreduce(np.ones(2048, dtype=np.float32), algorithm="ring")
        """, env={"LPMPI_NODE_TRANSPORT": "shm"}, timeout=60)
        ok(rc, out)
        assert not dead.exists() and alive.exists()
    finally:
        for p in (dead, alive):
            if p.exists():
                p.unlink()
