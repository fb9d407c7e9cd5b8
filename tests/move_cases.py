"""alltoall, alltoallv, allgatherv, reduce_scatter(counts=), gather, scatter and scan under mpiexec:
one spawn runs the whole matrix against numpy and prints one line per failing case and a
SUMMARY line (tests/test_move.py runs it at P = 1..5).

    mpiexec -n 3 python tests/move_cases.py

Cases, on COMM_WORLD and on a communicator of every other rank (a Split): every algorithm (auto
included), over MPI and over single-copy reads where the algorithm has them, blocking /
nonblocking / persistent (started twice), out of place / in place / recvbuf=None; every root of
gather and scatter; per-rank counts uneven, with zeros, all zero, and large enough for chunks and
the node-local transport, packed and with gaps between the blocks; counts=None (exchanged);
every dtype for the blocks' movers, every (dtype, op) of the contract for reduce_scatter with
counts.  Results: exact (the movers; integer reductions) or numpy's within floating tolerance,
the same bits from every form and transport, and bitwise identical on every rank where MPI's
result is (allgatherv).  Bad arguments raise on every rank before any communication, nothing
written.  The helpers (case, inputs, expect_error) are tests/blocks_cases.py's.
"""
from __future__ import annotations

import sys

import blocks_cases as bc
import numpy as np
from blocks_cases import NP_OPS, OPS, W, case, expect_error, inputs, valid
from mpi4py import MPI

import lpmpi
from lpmpi import engine

# every dtype at P <= 3; at P = 4, 5 (oversubscribed, slow here) a sample of them: the dtype
# paths do not depend on P, the schedules' block arithmetic does (every pattern, root and form
# still runs there)
DTYPES = (bc.DTYPES + ("uint64", "complex128", "int16") if W.size <= 3
          else ("bool", "int8", "float16", "float64", "complex64"))
# per-rank counts patterns: (name, count of rank i's block to rank j)
PATTERNS = (("uneven", lambda i, j, P: (3 * i + 5 * j + 1) % 4),
            ("zeros", lambda i, j, P: 0),
            ("large", lambda i, j, P: 3000 + 7 * i + 11 * j))


def forms(fn: str, args: tuple, kw: dict, once: bool = False) -> list:
    """The results of the blocking, nonblocking and persistent (twice, or once: in place) calls;
    each call gets fresh copies of its array arguments from args (a function of nothing)."""
    out = [getattr(lpmpi, fn)(*args(), **kw)]
    out.append(getattr(lpmpi, f"i{fn}")(*args(), **kw).wait())
    p = getattr(lpmpi, f"{fn}_init")(*args(), **kw)
    for _ in range(1 if once else 2):
        p.start()
        res = p.wait()
    out.append(res)
    p.free()
    return out


def same(got, want, name: str = "") -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape, got.dtype, want.dtype)
    assert got.tobytes() == want.tobytes(), (name, got.reshape(-1)[:8], want.reshape(-1)[:8])


def transports(alg: str, coll: str) -> tuple:
    """The node-local transports to force for this algorithm (None: the decision's)."""
    return (None, "mpi", "cma") if alg != "auto" and engine.has_transports(coll, alg) else (None,)


def check_alltoall(comm: MPI.Comm, tag: str) -> None:
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("alltoall"):
        for dt in DTYPES:
            for n in ((0, 1, 7, 5003) if dt == "float32" else (3,)):
                def run(alg=alg, dt=dt, n=n) -> bytes:
                    xs = [inputs(comm, P * n, dt, "sum", q).reshape(P, n) for q in range(P)]
                    want = np.stack([xs[q][r] for q in range(P)])
                    for tp in transports(alg, "alltoall"):
                        with engine.transport(tp):
                            kw = {"algorithm": alg, "comm": comm}
                            for y in forms("alltoall", lambda: (xs[r].copy(),), kw):
                                same(y, want, f"{tp} out of place")
                            o = np.full((P, n), 3, dt)
                            assert lpmpi.alltoall(xs[r], o, **kw) is o
                            same(o, want, "recvbuf")
                            for z in forms("alltoall", lambda: (lpmpi.IN_PLACE, xs[r].copy()), kw, once=True):
                                same(z, want, f"{tp} in place")
                            z = xs[r].reshape(-1).copy()
                            assert lpmpi.alltoall(z, z, **kw) is z
                            same(z, want.reshape(-1), "in place (recvbuf is sendbuf)")
                    return want.tobytes()
                case(f"{tag} alltoall {alg} {dt} n={n}", run)


def v_layout(counts: np.ndarray, gaps: bool) -> np.ndarray:
    """Displacements of blocks of these counts: packed, or one element apart."""
    d = np.zeros(len(counts), np.int64)
    if len(counts) > 1:
        d[1:] = np.cumsum(counts[:-1] + (1 if gaps else 0))
    return d


def check_alltoallv(comm: MPI.Comm, tag: str) -> None:
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("alltoallv"):
        for pname, f in PATTERNS:
            for dt in (("float32", "int64", "bool", "complex64") if pname == "uneven" else ("float64",)):
                for gaps in (False, True):
                    def run(alg=alg, f=f, dt=dt, gaps=gaps) -> None:
                        sc = np.array([[f(i, j, P) for j in range(P)] for i in range(P)], np.int64)
                        sd = [v_layout(sc[i], gaps) for i in range(P)]
                        xs = [inputs(comm, int(sd[i][-1] + sc[i][-1]) if P else 0, dt, "sum", i) for i in range(P)]
                        rc = sc[:, r]
                        rd = v_layout(rc, gaps)
                        ext = int(rd[-1] + rc[-1])
                        want = np.zeros(ext, dt)
                        for i in range(P):
                            want[rd[i]:rd[i] + rc[i]] = xs[i][sd[i][r]:sd[i][r] + sc[i][r]]
                        for tp in transports(alg, "alltoallv"):
                            with engine.transport(tp):
                                kw = {"algorithm": alg, "comm": comm, "sdispls": sd[r], "rdispls": rd}
                                mk = lambda: (xs[r].copy(), sc[r], np.zeros(ext, dt), rc)
                                for y in forms("alltoallv", mk, kw):
                                    same(y, want, f"{tp}")
                                if not gaps:   # counts exchanged, recvbuf allocated
                                    y = lpmpi.alltoallv(xs[r], list(sc[r]), algorithm=alg, comm=comm)
                                    same(y, want, "recvcounts=None")
                        assert np.array_equal(xs[r], inputs(comm, len(xs[r]), dt, "sum", r)), "sendbuf written"
                    case(f"{tag} alltoallv {alg} {pname} {dt} gaps={gaps}", run)
        # in place: symmetric counts (rank i sends rank j as much as j sends i)
        def run_inplace(alg=alg) -> None:
            c = np.array([(r + j) % 3 for j in range(P)], np.int64)
            d = v_layout(c, False)
            ext = int(c.sum())
            mine = inputs(comm, ext, "int32", "sum", r)
            others = [inputs(comm, int(np.array([(q + j) % 3 for j in range(P)]).sum()), "int32", "sum", q)
                      for q in range(P)]
            want = np.zeros(ext, np.int32)
            for q in range(P):
                cq = np.array([(q + j) % 3 for j in range(P)], np.int64)
                dq = v_layout(cq, False)
                want[d[q]:d[q] + c[q]] = others[q][dq[r]:dq[r] + cq[r]]
            for z in forms("alltoallv", lambda: (lpmpi.IN_PLACE, c, mine.copy(), c), {"algorithm": alg, "comm": comm},
                           once=True):
                same(z, want, "in place")
        case(f"{tag} alltoallv {alg} in place", run_inplace)


def check_allgatherv(comm: MPI.Comm, tag: str) -> None:
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("allgatherv"):
        for pname, f in PATTERNS:
            for dt in (DTYPES if pname == "uneven" else ("float32",)):
                for cb in ((None, 1024) if pname == "large" else (None,)):
                    def run(alg=alg, f=f, dt=dt, cb=cb) -> bytes:
                        counts = np.array([f(i, 0, P) for i in range(P)], np.int64)
                        xs = [inputs(comm, int(counts[i]), dt, "sum", i) for i in range(P)]
                        want = np.concatenate(xs) if P else np.zeros(0, dt)
                        for tp in transports(alg, "allgatherv"):
                            with engine.transport(tp):
                                kw = {"algorithm": alg, "comm": comm, "chunk_bytes": cb}
                                for y in forms("allgatherv", lambda: (xs[r].copy(), None, counts), kw):
                                    same(y, want, f"{tp}")
                                same(lpmpi.allgatherv(xs[r], **kw), want, "counts=None")
                                d = v_layout(counts, True)
                                o = np.full(int(d[-1] + counts[-1]), 9, dt)
                                lpmpi.allgatherv(xs[r], o, counts, displs=d, **kw)
                                for i in range(P):
                                    same(o[d[i]:d[i] + counts[i]], xs[i], "displs")
                                assert all(o[d[i] - 1] == np.array(9, dt) for i in range(1, P)), "a gap written"
                                z = np.zeros(int(counts.sum()), dt)
                                z[int(counts[:r].sum()):int(counts[:r + 1].sum())] = xs[r]
                                for zz in forms("allgatherv", lambda z=z: (lpmpi.IN_PLACE, z.copy(), counts), kw, once=True):
                                    same(zz, want, f"{tp} in place")
                        return want.tobytes()
                    case(f"{tag} allgatherv {alg} {pname} {dt} cb={cb}", run, same_on=comm)


def check_reduce_scatter_v(comm: MPI.Comm, tag: str) -> None:
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("reduce_scatter_v"):
        for pname, f in PATTERNS:
            for dt in (DTYPES if pname == "uneven" else ("float32", "int64")):
                for op in (OPS if pname == "uneven" else ("sum", "avg")):
                    if not valid(dt, op) or (op == "avg" and np.dtype(dt).kind not in "fc"):
                        continue
                    if pname == "uneven" and dt not in ("int32", "float32") and op not in ("sum", "max"):
                        continue
                    def run(alg=alg, f=f, dt=dt, op=op) -> None:
                        counts = np.array([f(i, 0, P) for i in range(P)], np.int64)
                        tot = int(counts.sum())
                        xs = [inputs(comm, tot, dt, op, q) for q in range(P)]
                        acc = xs[0].astype(bool).astype(dt) if op in ("land", "lor", "lxor") else xs[0]
                        for q in range(1, P):
                            acc = NP_OPS[op](acc, xs[q]).astype(dt)
                        if op == "avg":
                            acc = (acc.astype(np.complex128 if acc.dtype.kind == "c" else np.float64) / P).astype(dt)
                        off = int(counts[:r].sum())
                        want = acc[off:off + counts[r]]
                        kw = {"algorithm": alg, "comm": comm, "op": op, "counts": counts}
                        ys = []
                        for tp in transports(alg, "reduce_scatter_v"):
                            with engine.transport(tp):
                                ys += forms("reduce_scatter", lambda: (xs[r].copy(),), kw)
                                ys += [z[:counts[r]] for z in
                                       forms("reduce_scatter", lambda: (lpmpi.IN_PLACE, xs[r].copy()), kw, once=True)]
                        y = ys[0]
                        if np.dtype(dt).kind in "fc":
                            assert np.allclose(y.astype(np.complex128), want.astype(np.complex128),
                                               rtol=1e-2 if dt == "float16" else 1e-6, atol=1e-3), (y[:4], want[:4])
                        else:
                            same(y, want)
                        for z in ys[1:]:
                            same(z, y, "forms, transports, in place: the same bits")
                    case(f"{tag} reduce_scatter counts {alg} {pname} {dt} {op}", run)


def check_reduce_scatter_v_acc(comm: MPI.Comm, tag: str) -> None:
    """acc_dtype with counts: float16 summed in float32, each rank's block rounded once (its
    own count, not the total: a rounding of the total would write past recvbuf)."""
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("reduce_scatter_v"):
        for pname, f in PATTERNS:
            def run(alg=alg, f=f) -> None:
                counts = np.array([f(i, 0, P) for i in range(P)], np.int64)
                xs = [(inputs(comm, int(counts.sum()), "float32", "sum", q) / 3).astype(np.float16) for q in range(P)]
                off = int(counts[:r].sum())
                want = np.sum([x.astype(np.float64) for x in xs], axis=0)[off:off + counts[r]].astype(np.float16)
                guard = np.full(int(counts[r]) + 64, 7, np.float16)
                out = guard[:counts[r]]
                lpmpi.reduce_scatter(xs[r], out, counts=counts, algorithm=alg, comm=comm, acc_dtype="float32")
                same(out, want, "acc")
                assert np.all(guard[counts[r]:] == 7), "written past recvbuf"
                y = lpmpi.ireduce_scatter(xs[r], counts=counts, algorithm=alg, comm=comm, acc_dtype="float32").wait()
                same(y, want, "acc nonblocking")
            case(f"{tag} reduce_scatter counts acc {alg} {pname}", run)


def check_gather_scatter(comm: MPI.Comm, tag: str) -> None:
    P, r = comm.size, comm.rank
    for coll in ("gather", "scatter"):
        for alg in ("auto",) + lpmpi.algorithms(coll):
            for root in range(P):
                for dt in (DTYPES if root == 0 else ("float32",)):
                    for n in ((0, 1, 4099) if dt == "float32" else (5,)):
                        def run(coll=coll, alg=alg, root=root, dt=dt, n=n) -> None:
                            xs = [inputs(comm, n, dt, "sum", q) for q in range(P)]
                            big = np.stack(xs) if P else np.zeros((0, n), dt)     # gather's result, scatter's input
                            for tp in transports(alg, coll):
                                with engine.transport(tp):
                                    kw = {"algorithm": alg, "comm": comm, "root": root}
                                    if coll == "gather":
                                        for y in forms("gather", lambda: (xs[r].copy(),), kw):
                                            if r == root:
                                                same(y, big, f"{tp}")
                                            else:
                                                assert y is None, y
                                        if r == root:
                                            z = np.zeros((P, n), dt)
                                            z[r] = xs[r]
                                            args = lambda z=z: (lpmpi.IN_PLACE, z.copy())
                                        else:
                                            args = lambda: (xs[r].copy(), None)
                                        for y in forms("gather", args, kw, once=True):
                                            if r == root:
                                                same(y, big, f"{tp} in place")
                                    else:
                                        src = lambda: (big.copy() if r == root else None, np.zeros(n, dt))
                                        for y in forms("scatter", src, kw):
                                            same(y, xs[r], f"{tp}")
                                        same(lpmpi.scatter(big.copy(), **kw), xs[r], "recvbuf=None from sendbuf")
                                        if r == root:
                                            b = big.copy()
                                            assert lpmpi.scatter(b, lpmpi.IN_PLACE, **kw) is b
                                            same(b, big, "in place: sendbuf kept")
                                        else:
                                            same(lpmpi.scatter(None, np.zeros(n, dt), **kw), xs[r], "in place peer")
                        case(f"{tag} {coll} {alg} root={root} {dt} n={n}", run)


def check_errors(comm: MPI.Comm, tag: str) -> None:
    """Bad arguments, the same on every rank: every rank raises, nothing is written."""
    P = comm.size
    x = np.arange(4 * P, dtype=np.float32)
    o = np.full(4 * P, 7, np.float32)
    if P > 1:
        odd = np.ones(4 * P + 1, np.float32)
        expect_error(f"{tag} alltoall not divisible", ValueError, ("sendbuf", str(P)),
                     lambda: lpmpi.alltoall(odd, comm=comm), [])
    big = np.full(4 * P + 1, 7, np.float32)
    expect_error(f"{tag} alltoall recvbuf size", ValueError, ("recvbuf",), lambda: lpmpi.alltoall(x, big, comm=comm), [big])
    o64 = np.zeros(4 * P, np.float64)
    expect_error(f"{tag} alltoall dtype", TypeError, ("dtype",), lambda: lpmpi.alltoall(x, o64, comm=comm), [o64])
    ro = np.zeros(4 * P, np.float32)
    ro.flags.writeable = False
    expect_error(f"{tag} alltoall read-only", ValueError, ("read-only",), lambda: lpmpi.alltoall(x, ro, comm=comm), [])
    expect_error(f"{tag} alltoall algorithm", ValueError, ("algorithm",),
                 lambda: lpmpi.alltoall(x, o, comm=comm, algorithm="ring"), [o])
    expect_error(f"{tag} alltoall chunk_bytes", ValueError, ("chunk_bytes",),
                 lambda: lpmpi.alltoall(x, o, comm=comm, chunk_bytes=0), [o])
    expect_error(f"{tag} alltoall overlap", ValueError, ("overlap",),
                 lambda: lpmpi.alltoall(o, np.frombuffer(o.data, np.float32), comm=comm), [o])
    expect_error(f"{tag} alltoall in place without recvbuf", TypeError, ("recvbuf",),
                 lambda: lpmpi.alltoall(lpmpi.IN_PLACE, comm=comm), [])
    c = [1] * P
    expect_error(f"{tag} alltoallv sendcounts length", ValueError, ("sendcounts", str(P)),
                 lambda: lpmpi.alltoallv(x, [1] * (P + 1), o, c, comm=comm), [o])
    expect_error(f"{tag} alltoallv negative", ValueError, ("sendcounts", "non-negative"),
                 lambda: lpmpi.alltoallv(x, [-1] + [1] * (P - 1), o, c, comm=comm), [o])
    expect_error(f"{tag} alltoallv past sendbuf", ValueError, ("sendbuf", "sendcounts"),
                 lambda: lpmpi.alltoallv(x[:2], [3] * P, o, c, comm=comm), [o])
    expect_error(f"{tag} alltoallv counts not ints", TypeError, ("sendcounts",),
                 lambda: lpmpi.alltoallv(x, [0.5] * P, o, c, comm=comm), [o])
    if P > 1:
        expect_error(f"{tag} alltoallv overlapping rdispls", ValueError, ("rdispls", "overlap"),
                     lambda: lpmpi.alltoallv(x, c, o, c, comm=comm, rdispls=[0] * P), [o])
    small = np.full(1, 7, np.float32)
    expect_error(f"{tag} alltoallv recvbuf too small", ValueError, ("recvbuf",),
                 lambda: lpmpi.alltoallv(x, c, small, c, comm=comm) if P > 1 else
                 lpmpi.alltoallv(x, [2], small, [2], comm=comm), [small])
    rank = comm.rank
    expect_error(f"{tag} allgatherv count", ValueError, ("counts[", "sendbuf"),
                 lambda: lpmpi.allgatherv(x[:3], o, [4] * P, comm=comm), [o])
    expect_error(f"{tag} allgatherv in place without counts", TypeError, ("counts",),
                 lambda: lpmpi.allgatherv(lpmpi.IN_PLACE, o, comm=comm), [o])
    expect_error(f"{tag} allgatherv counts length", ValueError, ("counts",),
                 lambda: lpmpi.allgatherv(x[:4], o, [4] * (P + 2), comm=comm), [o])
    r4 = np.full(4, 7, np.float32)
    expect_error(f"{tag} reduce_scatter counts sum", ValueError, ("counts", "add up"),
                 lambda: lpmpi.reduce_scatter(x[:4 * P - 1], r4, counts=[4] * P, comm=comm), [r4])
    expect_error(f"{tag} reduce_scatter counts recvbuf", ValueError, ("recvbuf",),
                 lambda: lpmpi.reduce_scatter(x, np.full(5, 7, np.float32), counts=[4] * P, comm=comm), [r4])
    expect_error(f"{tag} reduce_scatter counts op/dtype", TypeError, ("op",),
                 lambda: lpmpi.reduce_scatter(np.ones(P, bool), op="sum", counts=[1] * P, comm=comm), [])
    g = np.full((P, 4), 7, np.float32)
    expect_error(f"{tag} gather root", ValueError, ("root",), lambda: lpmpi.gather(x[:4], g, root=P, comm=comm), [g])
    if P == 1:   # only the root checks recvbuf
        gb = np.full(4 * P + 4, 7, np.float32)
        expect_error(f"{tag} gather recvbuf size", ValueError, ("recvbuf",),
                     lambda: lpmpi.gather(x[:4], gb, root=0, comm=comm), [gb])
    expect_error(f"{tag} gather in place off the root", ValueError, ("IN_PLACE",) if rank != P - 1 else ("root",),
                 lambda: lpmpi.gather(lpmpi.IN_PLACE, g, root=P - 1, comm=comm) if rank != P - 1
                 else lpmpi.gather(lpmpi.IN_PLACE, g, root=P, comm=comm), [g])
    expect_error(f"{tag} scatter without buffers", TypeError, ("sendbuf",),
                 lambda: lpmpi.scatter(None, None, root=0, comm=comm), [])
    expect_error(f"{tag} scatter in place marker", TypeError, ("IN_PLACE",),
                 lambda: lpmpi.scatter(lpmpi.IN_PLACE, r4, root=0, comm=comm), [r4])
    assert rank == comm.rank


# MPI's ops whose results lpmpi's contract shares (its logical ops give 0 / 1 at every P)
MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN, "band": MPI.BAND,
           "bor": MPI.BOR, "bxor": MPI.BXOR}


def check_scan(comm: MPI.Comm, tag: str) -> None:
    """scan (MPI_Scan, the descriptor's proof collective): rank r's result is the reduction of
    ranks 0..r, checked against a float64 reference (exact for integers, within floating
    tolerance; avg divides by r + 1) on every rank, every (dtype, op) of the contract; MPI's
    own Scan gives the same bits; every form, in place, acc_dtype, and its errors."""
    P, r = comm.size, comm.rank
    n = 1000
    for alg in ("auto",) + lpmpi.algorithms("scan"):
        for dt in DTYPES:
            for op in OPS:
                if not valid(dt, op) or (op == "avg" and np.dtype(dt).kind not in "fc"):
                    continue
                if dt not in ("int32", "float32", "float64") and op not in ("sum", "max"):
                    continue
                def run(alg=alg, dt=dt, op=op) -> None:
                    xs = [inputs(comm, n, dt, op, q) for q in range(P)]
                    kind = np.dtype(dt).kind
                    wide = np.complex128 if kind == "c" else np.float64
                    acc = xs[0].astype(bool).astype(dt) if op in ("land", "lor", "lxor") else xs[0]
                    for q in range(1, r + 1):
                        acc = NP_OPS[op](acc, xs[q]).astype(dt)
                    ref64 = np.sum([x.astype(wide) for x in xs[:r + 1]], axis=0)
                    kw = {"algorithm": alg, "comm": comm, "op": op}
                    ys = forms("scan", lambda: (xs[r].copy(),), kw)
                    ys += forms("scan", lambda: (lpmpi.IN_PLACE, xs[r].copy()), kw, once=True)
                    ref = None     # MPI's own Scan, called on every rank before any check can fail
                    if op in MPI_OPS and dt in ("int8", "int32", "uint16", "int64", "float32", "float64"):
                        ref = np.empty_like(xs[r])
                        comm.Scan(xs[r], ref, op=MPI_OPS[op])
                    y = ys[0]
                    if op == "avg":
                        want = (ref64 / (r + 1)).astype(dt)
                    elif op == "sum" and kind in "fc":
                        want = ref64.astype(dt)
                    else:
                        want = acc
                    if kind in "fc":
                        assert np.allclose(y.astype(np.complex128), want.astype(np.complex128),
                                           rtol=1e-2 if dt == "float16" else 1e-6, atol=1e-3), (r, y[:4], want[:4])
                    else:
                        same(y, want, "scan against numpy")
                    for z in ys[1:]:
                        same(z, y, "forms, in place: the same bits")
                    if ref is not None and alg in ("auto", "native"):
                        same(y, ref, "MPI's own Scan")
                case(f"{tag} scan {alg} {dt} {op}", run)

    def acc16() -> None:
        xs = [(inputs(comm, n, "float32", "sum", q) / 3).astype(np.float16) for q in range(P)]
        want = np.sum([x.astype(np.float64) for x in xs[:r + 1]], axis=0).astype(np.float16)
        same(lpmpi.scan(xs[r], comm=comm, acc_dtype="float32"), want, "acc_dtype: rounded once")
    case(f"{tag} scan acc_dtype", acc16)
    x = np.arange(8, dtype=np.float32)
    o = np.full(8, 7, np.float32)
    expect_error(f"{tag} scan op", ValueError, ("op",), lambda: lpmpi.scan(x, o, op="median", comm=comm), [o])
    big = np.full(9, 7, np.float32)
    expect_error(f"{tag} scan recvbuf size", ValueError, ("recvbuf",), lambda: lpmpi.scan(x, big, comm=comm), [big])
    expect_error(f"{tag} scan algorithm", ValueError, ("algorithm",),
                 lambda: lpmpi.scan(x, o, comm=comm, algorithm="ring"), [o])


def main() -> int:
    comms = [(W, "world")]
    sub = W.Split(W.rank % 2, W.rank)        # ranks 0, 2, 4 ... and 1, 3 ...: strided
    if sub.size > 1:
        comms.append((sub, "split"))
    only = [a for a in sys.argv[1:] if not a.startswith("-")]
    checks = {"alltoall": check_alltoall, "alltoallv": check_alltoallv, "allgatherv": check_allgatherv,
              "reduce_scatter_v": check_reduce_scatter_v, "acc": check_reduce_scatter_v_acc,
              "gather_scatter": check_gather_scatter, "scan": check_scan,
              "errors": check_errors}
    for comm, tag in comms:
        for name, fn in checks.items():
            if not only or name in only:
                fn(comm, tag)
    nf = W.allreduce(len(bc.FAILS))
    if W.rank == 0:
        print(f"SUMMARY suite=move P={W.size} cases={bc.NCASES} failures={nf}", flush=True)
    return 1 if nf else 0


if __name__ == "__main__":
    sys.exit(main())
