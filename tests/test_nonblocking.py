"""Nonblocking and persistent collectives beyond the contract matrices (those run in every form:
tests/test_forms.py): many requests outstanding at once on one and on two communicators, mixed
with blocking calls and waited in reverse or random order; a persistent request started 1000
times (same bits every time, flat memory); the progress thread (and why it cannot start without
MPI_THREAD_MULTIPLE); requests dropped in flight; an MPI failure inside progress reported by the
request it belongs to; misuse of requests; a freed communicator under a persistent request."""
import re
import sys
import textwrap

import pytest
from _mpi import child_env, mpiexec, run

pytestmark = pytest.mark.mpi


COMMON = r"""
import os, random, sys
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
P, me = w.Get_size(), w.Get_rank()

def data(i, n, dt=np.float64):
    return (np.arange(n) % 97 + me + i).astype(dt)

def total(i, n, dt=np.float64):
    return sum((np.arange(n) % 97 + r + i).astype(dt) for r in range(P))

def ok():   # one write: the ranks' lines never interleave
    os.write(1, b"OK %d\n" % me)
"""


def spawn(tmp_path, body, n=2, timeout=180, env=None, args=(), common=True):
    """Run COMMON + body under mpiexec -n n; every rank must print a line starting "OK "."""
    script = tmp_path / "case.py"
    script.write_text((COMMON if common else "") + textwrap.dedent(body))
    cmd = [mpiexec(), "-n", str(n), sys.executable, *args, str(script)]
    rc, out, _ = run(cmd, child_env(env), timeout)
    assert rc == 0, f"exit status {rc} ({'timed out' if rc is None else 'failed'}):\n{out[-8000:]}"
    oks = set(re.findall(r"OK (\d+)", out))
    assert len(oks) == n, f"expected OK from {n} ranks:\n{out[-8000:]}"
    return out




MANY_OUTSTANDING = """
    algs = {c: lpmpi.algorithms(c) for c in ("allreduce", "reduce", "bcast")}

    def start(i, comm, n):
        coll = ("allreduce", "reduce", "bcast")[i % 3]
        alg = algs[coll][i % len(algs[coll])]
        root = i % comm.Get_size()
        x = data(i, n)
        if coll == "allreduce":
            return coll, root, x, lpmpi.iallreduce(x, algorithm=alg, chunk_bytes=512, comm=comm)
        if coll == "reduce":
            return coll, root, x, lpmpi.ireduce(x, root=root, algorithm=alg, chunk_bytes=512, comm=comm)
        buf = x if comm.Get_rank() == root else np.zeros(n)
        return coll, root, x, lpmpi.ibcast(buf, root=root, algorithm=alg, chunk_bytes=512, comm=comm)

    def check(i, item, comm, n):
        coll, root, x, req = item
        res = req.wait()
        cr = comm.Get_rank()
        if coll == "allreduce":
            assert np.array_equal(res, total(i, n)), (i, coll)
        elif coll == "reduce":
            assert (res is None) == (cr != root) and (res is None or np.array_equal(res, total(i, n))), (i, coll)
        else:                                # the root's data: its rank is `root` on w
            assert np.array_equal(res, (np.arange(n) % 97 + root + i).astype(np.float64)), (i, coll)

    for order in ("reverse", "random"):
        n = 3001
        items = []
        for i in range(12):
            items.append(start(i, w, n))
            if i % 4 == 3:                       # a blocking call among them
                y = lpmpi.allreduce(data(100 + i, 77), algorithm=algs["allreduce"][i % 5])
                assert np.array_equal(y, total(100 + i, 77))
        idx = list(range(12))[::-1] if order == "reverse" else random.Random(me * 31 + 7).sample(range(12), 12)
        for i in idx:
            check(i, items[i], w, n)
        assert lpmpi._core._outstanding() == 0

    # two communicators, requests interleaved between them, waited with waitall
    d = w.Dup()
    s = w.Split(me % 2, me)
    reqs, exp = [], []
    for i in range(10):
        comm = (w, d, s)[i % 3]
        x = data(i, 1000)
        reqs.append(lpmpi.iallreduce(x, comm=comm, algorithm=algs["allreduce"][i % 5], chunk_bytes=256))
        members = [r for r in range(P) if comm is not s or r % 2 == me % 2]
        exp.append(sum((np.arange(1000) % 97 + r + i) for r in members).astype(np.float64))
    for i, res in enumerate(lpmpi.waitall(reqs[::-1])[::-1]):
        assert np.array_equal(res, exp[i]), i
    d.Free(); s.Free()
    ok()
    """


@pytest.mark.parametrize("nprocs", (2, 3, 5), ids=lambda p: f"P{p}")
def test_many_outstanding_any_order(tmp_path, nprocs):
    """12 requests outstanding on one communicator (every collective and algorithm, blocking
    calls between them), waited in reverse order, then in a different random order on each
    rank; then the same across two communicators, interleaved."""
    spawn(tmp_path, MANY_OUTSTANDING, n=nprocs, timeout=240)


@pytest.mark.parametrize("nprocs", (2, 3), ids=lambda p: f"P{p}")
def test_many_outstanding_any_order_staged(tmp_path, nprocs):
    """The same on device memory's staged path (emulated on the host): native's MPI collective
    is issued after a staging copy, when each rank's progress gets there; before issue 25 the
    ranks issued them in different orders and this deadlocked at P = 2."""
    spawn(tmp_path, MANY_OUTSTANDING, n=nprocs, timeout=240, env={"LPMPI_EMULATE_STAGING": "1"})



def test_persistent_1000_starts_same_bits_flat_memory(tmp_path):
    """allreduce_init started 1000 times: the same bits every time, and the resident memory
    flat (within 1 MiB) after warm-up; every algorithm restarted, in place too."""
    spawn(tmp_path, """
    import hashlib

    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024

    x = (np.random.default_rng(me).random(1 << 18) - 0.5).astype(np.float32)   # 1 MiB
    y = np.empty_like(x)
    p = lpmpi.allreduce_init(x, y, algorithm="lp", chunk_bytes=64 << 10)
    digests = set()
    for i in range(1000):
        y.fill(np.nan)
        p.start()
        p.wait()
        if i == 50:
            base = rss()
        digests.add(hashlib.sha1(y.tobytes()).hexdigest())
    grown = rss() - base
    assert len(digests) == 1, len(digests)
    assert grown < (1 << 20), f"RSS grew by {grown} bytes over 950 starts"
    assert w.allgather(digests.pop()) == [hashlib.sha1(y.tobytes()).hexdigest()] * P
    ref = lpmpi.allreduce(x, algorithm="lp", chunk_bytes=64 << 10)
    assert ref.tobytes() == y.tobytes(), "persistent result differs from the blocking call's"
    p.free()

    for alg in lpmpi.algorithms("allreduce"):
        z = data(1, 5000)
        with lpmpi.allreduce_init(lpmpi.IN_PLACE, z, algorithm=alg, chunk_bytes=1000) as q:
            for i in range(20):
                z[:] = data(i, 5000)          # the buffer's current contents each start
                q.start()
                assert np.array_equal(q.wait(), total(i, 5000)), (alg, i)
        for coll in ("reduce", "bcast"):
            if alg not in lpmpi.algorithms(coll):
                continue
            b = data(3, 999)
            q = (lpmpi.reduce_init(b, root=P - 1, algorithm=alg) if coll == "reduce"
                 else lpmpi.bcast_init(b, root=0, algorithm=alg))
            for i in range(5):
                b[:] = data(i, 999)
                q.start()
                res = q.wait()
                if coll == "reduce":
                    assert (res is None) == (me != P - 1)
                    assert res is None or np.array_equal(res, total(i, 999)), (alg, coll, i)
                else:
                    assert np.array_equal(res, np.arange(999) % 97 + 0 + i), (alg, coll, i)
            q.free()
    ok()
    """, timeout=240)


@pytest.mark.parametrize("how", ["call", "env"])
def test_progress_thread_overlaps(tmp_path, how):
    """With the progress thread, a nonblocking allreduce completes while the caller sleeps
    (GIL released): a wait after the sleep finds it done; results right; the thread stops."""
    spawn(tmp_path, """
    import time
    if HOW == "call":
        assert lpmpi.progress_thread(True) is True
    assert lpmpi.progress_thread(True) is True     # running (started by the call or the env)
    x = data(0, 1 << 20)
    for alg in ("lp", "ring", "native", "mst", "be"):
        t0 = time.perf_counter()
        req = lpmpi.iallreduce(x, algorithm=alg)
        time.sleep(0.5)                     # far longer than the allreduce of 8 MiB
        done = req.done                     # no progress made by this check
        res = req.wait()
        assert np.array_equal(res, total(0, 1 << 20)), alg
        assert done, f"{alg}: not complete after 0.5 s of sleep with the progress thread"
    reqs = [lpmpi.iallreduce(data(i, 4096), algorithm="lp", chunk_bytes=1024) for i in range(8)]
    time.sleep(0.2)
    assert all(r.done for r in reqs)
    assert lpmpi.progress_thread(False) is False
    ok()
    """.replace("HOW", repr(how)), env={"LPMPI_PROGRESS_THREAD": "1"} if how == "env" else None)


def test_progress_thread_needs_thread_multiple(tmp_path):
    """Without MPI_THREAD_MULTIPLE the progress thread refuses to start, saying why; with
    LPMPI_PROGRESS_THREAD=1 import warns instead of failing; collectives still work."""
    spawn(tmp_path, """
    import warnings
    import mpi4py
    mpi4py.rc.thread_level = "serialized"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import numpy as np, lpmpi
    from mpi4py import MPI
    msgs = [str(c.message) for c in caught]
    assert any("LPMPI_PROGRESS_THREAD" in m and "MPI_THREAD_MULTIPLE" in m for m in msgs), msgs
    try:
        lpmpi.progress_thread(True)
    except lpmpi.LPError as e:
        assert "MPI_THREAD_MULTIPLE" in str(e) and "MPI_THREAD_SERIALIZED" in str(e), e
    else:
        raise AssertionError("progress_thread(True) started without MPI_THREAD_MULTIPLE")
    y = lpmpi.iallreduce(np.ones(10)).wait()
    assert (y == MPI.COMM_WORLD.Get_size()).all()
    import os; os.write(1, b"OK %d\\n" % MPI.COMM_WORLD.Get_rank())
    """, env={"LPMPI_PROGRESS_THREAD": "1"}, common=False)


def test_dropped_requests_complete_with_a_warning(tmp_path):
    """Requests dropped while in flight (never waited): a ResourceWarning each, their buffers
    kept alive, completed by later calls or at exit (before MPI_Finalize), no hang, no crash."""
    out = spawn(tmp_path, """
    import gc, warnings
    warnings.simplefilter("always", ResourceWarning)
    x = data(0, 1 << 16)
    y = np.zeros_like(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        lpmpi.iallreduce(x, y, algorithm="lp", chunk_bytes=4096)     # dropped at once
        gc.collect()
    assert any(issubclass(c.category, ResourceWarning) for c in caught), caught
    z = lpmpi.allreduce(data(1, 100))       # later calls advance it, to completion
    assert np.array_equal(z, total(1, 100))
    while lpmpi._core.progress():
        pass
    assert np.array_equal(y, total(0, 1 << 16)), "the dropped request's result"
    for i in range(3):                       # these ones are still in flight at exit
        lpmpi.iallreduce(data(i, 1 << 18), algorithm=("lp", "ring", "be")[i])
    ok()
    """, args=("-W", "always::ResourceWarning"))
    assert "completing" in out and "ResourceWarning" in out, out[-3000:]


def test_mpi_failure_inside_progress_is_the_requests(tmp_path):
    """An MPI failure while a request progresses (injected into its first transfer on every
    rank) is raised as LPError by that request's wait/test, not by the others; everything
    else still works afterwards.  The ring runs over MPI here (LPMPI_NODE_TRANSPORT=mpi): over
    the shared-memory transport it makes no MPI transfer to inject a fault into."""
    spawn(tmp_path, env={"LPMPI_NODE_TRANSPORT": "mpi"}, body="""
    a = lpmpi.iallreduce(data(0, 10000), algorithm="lp", chunk_bytes=1000)
    lpmpi._core._test_fault(1)            # the next point-to-point call of the engine fails
    b = lpmpi.iallreduce(data(1, 10000), algorithm="ring", chunk_bytes=1000)
    c = lpmpi.ibcast(data(2, 500), root=0, algorithm="be")
    try:
        b.wait()
    except lpmpi.LPError as e:
        assert "injected fault" in str(e), e
    else:
        raise AssertionError("no LPError from the failed request")
    try:
        b.test()
    except lpmpi.LPError:
        pass
    else:
        raise AssertionError("test() of the failed request did not raise")
    assert np.array_equal(a.wait(), total(0, 10000))
    assert np.array_equal(c.wait(), np.arange(500) % 97 + 0 + 2)
    assert np.array_equal(lpmpi.allreduce(data(3, 999), algorithm="ring"), total(3, 999))
    ok()
    """)


def test_request_misuse(tmp_path):
    """start() of a nonblocking request or of an active persistent one, a freed request, and
    waitall of something else raise clear errors; done/repr/context manager behave."""
    spawn(tmp_path, """
    def raises(exc, fn, *words):
        try:
            fn()
        except exc as e:
            assert all(wd in str(e) for wd in words), (str(e), words)
        else:
            raise AssertionError(f"no {exc.__name__}")

    r = lpmpi.iallreduce(np.ones(5))
    assert isinstance(r, lpmpi.Request) and not r.persistent
    raises(ValueError, r.start, "persistent")
    assert "nonblocking allreduce" in repr(r)
    r.wait(); r.wait()
    assert r.done and r.test()
    p = lpmpi.allreduce_init(np.ones(1 << 16), algorithm="lp", chunk_bytes=4096)
    assert p.persistent and p.done and p.test()        # inactive: complete, no error
    assert p.wait() is not None                        # waiting an inactive one returns at once
    p.start()
    raises(ValueError, p.start, "still in flight")
    p.wait()
    p.free(); p.free()
    raises(ValueError, p.wait, "freed")
    raises(TypeError, lambda: lpmpi.waitall([r, 3]), "Request")
    assert lpmpi.waitall([]) == []
    with lpmpi.bcast_init(np.arange(4.0), root=0) as q:
        q.start()
        assert np.array_equal(q.wait(), np.arange(4.0))
    raises(ValueError, q.start, "freed")
    ok()
    """)


def test_freed_communicator_under_a_persistent_request(tmp_path):
    """Freeing a communicator completes what runs on it; a persistent request made on it then
    refuses to start (ValueError) instead of using a dead context."""
    spawn(tmp_path, """
    d = w.Dup()
    p = lpmpi.allreduce_init(np.ones(100), comm=d)
    a = lpmpi.iallreduce(np.ones(1 << 16), comm=d, algorithm="lp", chunk_bytes=4096)
    d.Free()                                   # completes `a` first
    assert a.done and np.array_equal(a.wait(), np.full(1 << 16, P))
    try:
        p.start()
    except ValueError as e:
        assert "freed" in str(e), e
    else:
        raise AssertionError("started on a freed communicator")
    p.free()
    ok()
    """)


def test_threads_nonblocking_on_different_communicators(tmp_path):
    """Four threads, each on its own communicator, start and wait nonblocking collectives while
    the progress thread runs: all results right."""
    spawn(tmp_path, """
    import threading
    lpmpi.progress_thread(True)
    comms = [w.Dup() for _ in range(4)]
    done = [False] * 4
    def work(t):
        c = comms[t]
        for i in range(20):
            reqs = [lpmpi.iallreduce(data(i + j, 2000), comm=c, algorithm=("lp", "ring", "be", "native")[(t + j) % 4],
                                     chunk_bytes=512) for j in range(3)]
            for j, r in enumerate(reqs):
                assert np.array_equal(r.wait(), total(i + j, 2000)), (t, i, j)
        done[t] = True
    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert all(done), done
    lpmpi.progress_thread(False)
    for c in comms:
        c.Free()
    ok()
    """, timeout=240)


def test_same_buffers_new_plans(tmp_path):
    """Blocking, nonblocking and persistent calls on the same buffers whose plan changes from
    call to call (root, chunk, op, algorithm, in place or not): a request reused with the same
    buffers must never run the previous call's schedule."""
    spawn(tmp_path, """
    x = data(0, 1000)
    y = np.zeros(1000)
    z = np.zeros(1000)
    for rnd in range(2):
        for alg in ("lp", "ring", "mst", "be", "native"):
            for chunk in (64, 800, 8000):
                for root in range(P):
                    if alg != "ring":
                        res = lpmpi.reduce(x, y, root=root, algorithm=alg, chunk_bytes=chunk)
                        assert (res is None) == (me != root), (alg, chunk, root)
                        assert res is None or np.array_equal(res, total(0, 1000)), (alg, chunk, root)
                        b = data(root, 1000) if me == root else z
                        res = lpmpi.ibcast(b, root=root, algorithm=alg, chunk_bytes=chunk).wait()
                        assert np.array_equal(res, np.arange(1000) % 97 + root + root), (alg, chunk, root)
                        z[:] = 0
                    res = lpmpi.allreduce(x, y, op=("sum", "max")[root % 2], algorithm=alg, chunk_bytes=chunk)
                    exp = total(0, 1000) if root % 2 == 0 else data(0, 1000) + P - 1 - me
                    assert np.array_equal(res, exp), (alg, chunk, root)
                y[:] = x
                lpmpi.allreduce(lpmpi.IN_PLACE, y, algorithm=alg, chunk_bytes=chunk)
                assert np.array_equal(y, total(0, 1000)), (alg, chunk, "in place")
    ok()
    """, n=3, timeout=240)
