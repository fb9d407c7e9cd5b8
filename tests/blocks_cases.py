"""allgather and reduce_scatter under mpiexec: one spawn runs the whole matrix and prints one
line per failing case and a SUMMARY line (tests/test_blocks.py runs it at P = 1..5).

    mpiexec -n 3 python tests/blocks_cases.py [--big | --device]

Cases: every algorithm (auto included) x blocking / nonblocking / persistent x out of place /
in place / recvbuf=None, on COMM_WORLD and on a communicator of every other rank (a Split:
ranks that are not consecutive), counts 0, 1, primes, counts that do not divide by the chunk;
allgather on every dtype, reduce_scatter on every (dtype, op) pair of the contract (AVG
included).  allgather: exact, and bitwise identical on every rank; reduce_scatter: numpy's
reduction within floating tolerance (exact for integers), the same bits from every form and
from a second run.  Bad arguments raise on every rank before any communication, nothing
written.  --big: one allgather and one reduce_scatter of more than 2**31 bytes.  --device
(LPMPI_EMULATE_STAGING=1): instead, the calls on device arrays give the host calls' bits.
"""
from __future__ import annotations

import sys
import traceback

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import engine

W = MPI.COMM_WORLD
FAILS: list[str] = []
NCASES = 0
DTYPES = ("bool", "int8", "int32", "uint16", "int64", "float16", "float32", "float64", "complex64")
OPS = ("sum", "prod", "max", "min", "avg", "land", "lor", "lxor", "band", "bor", "bxor")
NP_OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "avg": np.add,
          "land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor,
          "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}


def case(name: str, fn, same_on: MPI.Comm | None = None) -> None:
    """Run fn; with same_on, fn returns bytes that must be the same on every rank of same_on,
    compared after fn on every rank whether fn failed or not (a rank that failed must not skip
    the collective the others wait in: a wrong result would read as a hang)."""
    global NCASES
    NCASES += 1
    got = None
    try:
        got = fn()
    except Exception:   # noqa: BLE001 - reported per case
        FAILS.append(f"FAIL rank={W.rank} case={name}: {traceback.format_exc(limit=3)}")
        # at once: the ranks that passed go on to the case's next collective, which this rank
        # skips, and the run may then end by the test's timeout without its summary
        print(FAILS[-1], flush=True)
    if same_on is not None:
        digests = [d for d in same_on.allgather(got) if d is not None]
        if any(d != digests[0] for d in digests):
            FAILS.append(f"FAIL rank={W.rank} case={name}: results differ between ranks")
            print(FAILS[-1], flush=True)


def valid(dt: str, op: str) -> bool:
    x = np.zeros(1, dt)
    try:
        lpmpi.reduce_scatter(x.repeat(1), op=op, comm=MPI.COMM_SELF)
        return True
    except TypeError:
        return False


def inputs(comm: MPI.Comm, n: int, dt: str, op: str, rank: int) -> np.ndarray:
    rng = np.random.default_rng(1000 * rank + n)
    d = np.dtype(dt)
    if d.kind == "b":
        return rng.integers(0, 2, n).astype(d)
    if d.kind in "iu":
        return rng.integers(0, 5 if op != "prod" else 3, n).astype(d)
    if op == "prod":   # exact in any order
        return (2.0 ** rng.integers(-1, 2, n)).astype(d)
    return rng.integers(-4, 5, n).astype(d)   # small integers: sums exact in any order


def check_allgather(comm: MPI.Comm, tag: str) -> None:
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("allgather"):
        for dt in DTYPES:
            for n in (0, 1, 7, 1000, 70001):
                for cb in (None, 1024):
                    name = f"{tag} allgather {alg} {dt} n={n} cb={cb}"

                    def run(alg=alg, dt=dt, n=n, cb=cb) -> None:
                        x = inputs(comm, n, dt, "sum", r).reshape(-1, 1) if n % 7 == 0 and n else inputs(comm, n, dt, "sum", r)
                        want = np.stack([inputs(comm, n, dt, "sum", q).reshape(x.shape) for q in range(P)])
                        kw = {"algorithm": alg, "chunk_bytes": cb, "comm": comm}
                        y = lpmpi.allgather(x, **kw)                       # recvbuf=None
                        assert y.shape == (P,) + x.shape and y.dtype == x.dtype, (y.shape, y.dtype)
                        assert np.array_equal(y, want)
                        out = np.full((P,) + x.shape, 3, dt)
                        assert lpmpi.allgather(x, out, **kw) is out and np.array_equal(out, want)
                        z = np.zeros((P,) + x.shape, dt)
                        z[r] = x
                        lpmpi.allgather(lpmpi.IN_PLACE, z, **kw)
                        assert np.array_equal(z, want)
                        if alg == "ring":   # over MPI, single-copy reads and shared memory
                            for tp in ("mpi", "cma", "shm"):
                                with engine.transport(tp):
                                    assert np.array_equal(lpmpi.allgather(x, **kw), want), tp
                                    zt = np.zeros((P,) + x.shape, dt)
                                    zt[r] = x
                                    lpmpi.allgather(lpmpi.IN_PLACE, zt, **kw)
                                    assert np.array_equal(zt, want), tp
                        q = lpmpi.iallgather(x, **kw).wait()
                        assert np.array_equal(q, want)
                        out2 = np.empty_like(out)
                        p = lpmpi.allgather_init(x, out2, **kw)
                        for _ in range(2):
                            out2.fill(0)
                            p.start()
                            p.wait()
                            assert np.array_equal(out2, want)
                        p.free()
                        assert np.array_equal(x, inputs(comm, n, dt, "sum", r).reshape(x.shape)), "sendbuf written"
                        return y.tobytes()
                    case(name, run, same_on=comm)


def check_reduce_scatter(comm: MPI.Comm, tag: str) -> None:
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("reduce_scatter"):
        for dt in DTYPES:
            for op in OPS:
                if not valid(dt, op):
                    continue
                for n in ((0, 1, 5, 1000, 30011) if (dt, op) in (("float32", "sum"), ("float64", "avg"))
                          else (1, 997)):
                    name = f"{tag} reduce_scatter {alg} {dt} {op} n={n}"

                    def run(alg=alg, dt=dt, op=op, n=n) -> None:
                        xs = [inputs(comm, P * n, dt, op, q).reshape(P, n) for q in range(P)]
                        x = xs[r].copy()
                        acc = xs[0].astype(bool).astype(dt) if op in ("land", "lor", "lxor") else xs[0]
                        for q in range(1, P):
                            acc = NP_OPS[op](acc, xs[q]).astype(dt)
                        if op == "avg":
                            acc = (acc.astype(np.complex128 if acc.dtype.kind == "c" else np.float64) / P).astype(dt)
                        want = acc[r]
                        kw = {"algorithm": alg, "chunk_bytes": 1024, "comm": comm}
                        y = lpmpi.reduce_scatter(x, op=op, **kw)         # recvbuf=None: shape[1:]
                        assert y.shape == (n,) and y.dtype == x.dtype, (y.shape, y.dtype)
                        if np.dtype(dt).kind in "fc":
                            assert np.allclose(y.astype(np.complex128), want.astype(np.complex128),
                                               rtol=1e-2 if dt == "float16" else 1e-6, atol=1e-3), (y[:4], want[:4])
                        else:
                            assert np.array_equal(y, want), (y[:8], want[:8])
                        assert np.array_equal(x, xs[r]), "sendbuf written"
                        again = lpmpi.reduce_scatter(x, op=op, **kw)
                        assert again.tobytes() == y.tobytes(), "not the same bits run to run"
                        flat = x.reshape(-1).copy()
                        out = lpmpi.reduce_scatter(flat, np.empty(n, dt), op=op, **kw)
                        assert out.tobytes() == y.tobytes()
                        z = x.copy()
                        assert lpmpi.reduce_scatter(lpmpi.IN_PLACE, z, op=op, **kw) is z
                        assert z[0].tobytes() == y.tobytes(), "in place: not in the first block"
                        assert lpmpi.ireduce_scatter(x, op=op, **kw).wait().tobytes() == y.tobytes()
                        if alg == "ring":   # over MPI, single-copy reads, shared memory: the same bits
                            for tp in ("mpi", "cma", "shm"):
                                with engine.transport(tp):
                                    t = lpmpi.reduce_scatter(x, op=op, **kw)
                                    zt = x.copy()
                                    lpmpi.reduce_scatter(lpmpi.IN_PLACE, zt, op=op, **kw)
                                assert t.tobytes() == y.tobytes() and zt[0].tobytes() == y.tobytes(), tp
                        o2 = np.empty(n, dt)
                        p = lpmpi.reduce_scatter_init(x, o2, op=op, **kw)
                        for _ in range(2):
                            o2.fill(0)
                            p.start()
                            p.wait()
                            assert o2.tobytes() == y.tobytes()
                        p.free()
                    case(name, run)


def expect_error(name: str, exc: type, words: tuple[str, ...], fn, untouched: list[np.ndarray]) -> None:
    def run() -> None:
        before = [u.copy() for u in untouched]
        try:
            fn()
        except exc as e:
            assert all(w in str(e) for w in words), f"{e!s} lacks {words}"
        else:
            raise AssertionError(f"no {exc.__name__}")
        assert all(np.array_equal(a, b) for a, b in zip(untouched, before)), "a buffer was written"
    case(name, run)


def check_errors(comm: MPI.Comm, tag: str) -> None:
    P = comm.size
    x = np.arange(4, dtype=np.float32)
    out = np.full((P + 1, 4), 7, np.float32)
    expect_error(f"{tag} allgather recvbuf too big", ValueError, ("recvbuf",),
                 lambda: lpmpi.allgather(x, out, comm=comm), [out])
    o64 = np.zeros((P, 4), np.float64)
    expect_error(f"{tag} allgather dtype", TypeError, ("dtype",), lambda: lpmpi.allgather(x, o64, comm=comm), [o64])
    expect_error(f"{tag} allgather in place without recvbuf", TypeError, ("recvbuf",),
                 lambda: lpmpi.allgather(lpmpi.IN_PLACE, comm=comm), [])
    expect_error(f"{tag} allgather unknown algorithm", ValueError, ("algorithm",),
                 lambda: lpmpi.allgather(x, comm=comm, algorithm="mst"), [])
    ro = np.zeros((P, 4), np.float32)
    ro.flags.writeable = False
    expect_error(f"{tag} allgather read-only", ValueError, ("read-only",), lambda: lpmpi.allgather(x, ro, comm=comm), [])
    s = np.ones(P * 4 + 1, np.float32)
    r1 = np.full(4, 5, np.float32)
    if P > 1:
        expect_error(f"{tag} reduce_scatter not divisible", ValueError, ("sendbuf", str(P)),
                     lambda: lpmpi.reduce_scatter(s, r1, comm=comm), [r1])
    s2 = np.ones(P * 4, np.float32)
    r2 = np.full(5, 5, np.float32)
    expect_error(f"{tag} reduce_scatter recvbuf size", ValueError, ("recvbuf",),
                 lambda: lpmpi.reduce_scatter(s2, r2, comm=comm), [r2])
    expect_error(f"{tag} reduce_scatter op/dtype", TypeError, ("op",),
                 lambda: lpmpi.reduce_scatter(np.ones(P, bool), op="sum", comm=comm), [])
    r16 = np.full(4, 5, np.float16)
    expect_error(f"{tag} reduce_scatter acc_dtype on float32", TypeError, ("acc_dtype", "float16 or bfloat16"),
                 lambda: lpmpi.reduce_scatter(np.ones(P * 4, np.float32), comm=comm, acc_dtype="float32"), [])
    expect_error(f"{tag} reduce_scatter acc_dtype with max", TypeError, ("acc_dtype", "'max'"),
                 lambda: lpmpi.reduce_scatter(np.ones(P * 4, np.float16), r16, op="max", comm=comm,
                                              acc_dtype="float32"), [r16])
    expect_error(f"{tag} reduce_scatter overlap", ValueError, ("overlap",),
                 lambda: lpmpi.reduce_scatter(s2, s2[:4], comm=comm), [])


def check_device(comm: MPI.Comm, tag: str) -> None:
    """--device (under LPMPI_EMULATE_STAGING=1, with or without LPMPI_CUDA_AWARE=1): the same
    calls on device arrays (lpmpi's host-backed stand-in) give the host calls' bits, in every
    form and in place; recvbuf=None returns a device array of the right shape."""
    from lpmpi._devarray import HostDeviceArray as D
    P, r = comm.size, comm.rank
    for alg in ("auto",) + lpmpi.algorithms("allgather"):
        for dt in ("int8", "float32", "float64"):
            for n in (0, 1, 7, 1000, 70001):
                name = f"{tag} device allgather {alg} {dt} n={n}"

                def run(alg=alg, dt=dt, n=n) -> None:
                    x = inputs(comm, n, dt, "sum", r)
                    want = np.stack([inputs(comm, n, dt, "sum", q) for q in range(P)])
                    kw = {"algorithm": alg, "comm": comm, "chunk_bytes": 1024}
                    y = lpmpi.allgather(D(x), **kw)
                    assert isinstance(y, D) and y.shape == (P, n), (type(y), y.shape)
                    assert np.array_equal(y.get(), want)
                    out = D(np.full((P, n), 3, dt))
                    lpmpi.allgather(D(x), out, **kw)
                    assert np.array_equal(out.get(), want)
                    zh = np.zeros((P, n), dt)
                    zh[r] = x
                    z = D(zh)
                    lpmpi.allgather(lpmpi.IN_PLACE, z, **kw)
                    assert np.array_equal(z.get(), want)
                    assert np.array_equal(lpmpi.iallgather(D(x), **kw).wait().get(), want)
                    o2 = D(np.zeros((P, n), dt))
                    p = lpmpi.allgather_init(D(x), o2, **kw)
                    for _ in range(2):
                        o2.view_host().fill(0)
                        p.start()
                        p.wait()
                        assert np.array_equal(o2.get(), want)
                    p.free()
                case(name, run)
    for alg in ("auto",) + lpmpi.algorithms("reduce_scatter"):
        for dt, op in (("float32", "sum"), ("float64", "avg"), ("int32", "max")):
            for n in (0, 1, 5, 1000, 30011):
                name = f"{tag} device reduce_scatter {alg} {dt} {op} n={n}"

                def run(alg=alg, dt=dt, op=op, n=n) -> None:
                    x = inputs(comm, P * n, dt, op, r).reshape(P, n)
                    kw = {"algorithm": alg, "comm": comm, "chunk_bytes": 1024, "op": op}
                    want = lpmpi.reduce_scatter(x, **kw)             # host memory: the bits to match
                    y = lpmpi.reduce_scatter(D(x), **kw)
                    assert isinstance(y, D) and y.shape == (n,), (type(y), y.shape)
                    assert y.get().tobytes() == want.tobytes()
                    out = D(np.full(n, 3, dt))
                    lpmpi.reduce_scatter(D(x), out, **kw)
                    assert out.get().tobytes() == want.tobytes()
                    z = D(x.copy())
                    lpmpi.reduce_scatter(lpmpi.IN_PLACE, z, **kw)
                    assert z.get()[0].tobytes() == want.tobytes()
                    assert lpmpi.ireduce_scatter(D(x), **kw).wait().get().tobytes() == want.tobytes()
                    o2 = D(np.zeros(n, dt))
                    p = lpmpi.reduce_scatter_init(D(x), o2, **kw)
                    for _ in range(2):
                        o2.view_host().fill(0)
                        p.start()
                        p.wait()
                        assert o2.get().tobytes() == want.tobytes()
                    p.free()
                case(name, run)


def check_big(comm: MPI.Comm) -> None:
    """More than 2**31 bytes once each (ring: pieces of the largest MPI message)."""
    P, r = comm.size, comm.rank
    n = ((1 << 31) // 4 + 4096) // P * P // P          # one block, float32; P blocks > 2 GiB
    x = np.full(n, r + 1, np.float32)
    y = lpmpi.allgather(x, algorithm="ring")
    case("big allgather", lambda y=y: [np.testing.assert_array_equal(y[q, ::65536], q + 1) for q in range(P)])
    del y
    s = np.ones(P * n, np.float32)
    z = lpmpi.reduce_scatter(s, algorithm="ring")
    case("big reduce_scatter", lambda: np.testing.assert_array_equal(z[::65536], P))


def main() -> int:
    comms = [(W, "world")]
    sub = W.Split(W.rank % 2, W.rank)        # ranks 0, 2, 4 ... and 1, 3 ...: strided
    if sub.size > 1:
        comms.append((sub, "split"))
    for comm, tag in comms:
        if "--device" in sys.argv:
            check_device(comm, tag)
            continue
        check_allgather(comm, tag)
        check_reduce_scatter(comm, tag)
        check_errors(comm, tag)
    if "--big" in sys.argv:
        check_big(W)
    nf = W.allreduce(len(FAILS))
    if W.rank == 0:
        print(f"SUMMARY suite=blocks P={W.size} cases={NCASES} failures={nf}", flush=True)
    return 1 if nf else 0


if __name__ == "__main__":
    sys.exit(main())
