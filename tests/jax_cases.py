"""Cases of lpmpi.jax (issue 28), run under mpiexec by tests/test_jax.py: every collective
against a numpy reference computed here and against the eager lpmpi call on numpy arrays, inside
``jax.jit`` and eagerly, every op / dtype pairing lpmpi takes, counts 0, 1, a prime and a large
one, on the default communicator and on a split one; ``vmap``; ``grad`` / ``jvp`` /
``linear_transpose`` of allreduce SUM; program order of several collectives in one jitted
function and across jitted functions dispatched without waiting; argument errors raised on
every rank; mpi4jax's call forms (and mpi4jax itself, where installed, giving the same results).

    mpiexec -n P python tests/jax_cases.py [--quick] [--x64]
"""
from __future__ import annotations

import sys
import traceback
import zlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from mpi4py import MPI

import lpmpi
import lpmpi.jax as lj

try:
    import mpi4jax
except ImportError:
    mpi4jax = None

WORLD = MPI.COMM_WORLD
P, RANK = WORLD.Get_size(), WORLD.Get_rank()
FAILS: list[str] = []
NCASES = 0
QUICK = "--quick" in sys.argv
COUNTS = (0, 1, 7) if QUICK else (0, 1, 7, 4099, 100003)
X64 = "--x64" in sys.argv          # 64-bit types (jax_enable_x64): the dtype matrix only
if X64:
    jax.config.update("jax_enable_x64", True)
DTYPES = (("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "bfloat16", "float32", "float64", "complex64", "complex128") if X64 else
          ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "bfloat16",
           "float32", "complex64"))
OPS = ("sum", "prod", "max", "min", "avg", "land", "lor", "lxor", "band", "bor", "bxor")
# P >= 3 oversubscribes a 2-core machine: every Nth case (by a hash of its name) there
SAMPLE = 1 if P <= 2 else 2


# a failed comparison is recorded and the case goes on (so that every rank makes the same
# collective calls: a rank leaving a case early would hang the others), then fails at its end
MISMATCHES: list[str] = []


def case(name: str, fn) -> None:
    global NCASES
    if SAMPLE > 1 and zlib.crc32(name.encode()) % SAMPLE:
        return
    NCASES += 1
    MISMATCHES.clear()
    try:
        fn()
        if MISMATCHES:
            raise AssertionError("; ".join(MISMATCHES))
    except Exception:  # noqa: BLE001
        FAILS.append(f"FAIL rank={RANK} case={name}: {traceback.format_exc(limit=6)}")
        print(FAILS[-1], flush=True)


def npdt(name: str):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def data(q: int, shape, dt: str, salt: int = 0) -> np.ndarray:
    """Rank q's input: small values, so that sums and products are exact in every dtype."""
    n = int(np.prod(shape))
    v = (np.arange(n, dtype=np.int64) * 7 + q * 3 + salt) % 5 + 1
    if dt == "bool":
        return (v % 2).astype(bool).reshape(shape)
    if dt.startswith("complex"):
        return (v + 1j * ((v + q) % 3)).astype(dt).reshape(shape)
    return v.astype(npdt(dt)).reshape(shape)


def reference(xs: list[np.ndarray], op: str) -> np.ndarray:
    """The reduction of xs in float64 / complex128 / int64, cast back."""
    dt = xs[0].dtype
    wide = (np.complex128 if dt.kind == "c" else np.float64 if dt.kind == "f" or
            dt == npdt("bfloat16") else np.int64)
    a = [x.astype(wide) for x in xs]
    r = a[0] != 0 if op in ("land", "lor", "lxor") else a[0]   # logical results are 0 / 1
    for y in a[1:]:
        r = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum,
             "min": np.minimum, "land": np.logical_and, "lor": np.logical_or,
             "lxor": np.logical_xor, "band": np.bitwise_and, "bor": np.bitwise_or,
             "bxor": np.bitwise_xor}[op](r, y)
    if op == "avg":
        r = r / len(a) if dt.kind in "fc" or dt == npdt("bfloat16") else r // len(a)
    return r.astype(dt)


def _wide(a: np.ndarray) -> np.ndarray:
    k = a.dtype.kind
    return a.astype(np.complex128 if k == "c" else np.float64 if k == "f" or
                    a.dtype == npdt("bfloat16") else np.int64)


def raises_both(fn, exc, text: str) -> None:
    """fn raises exc with text in its message, eagerly and under jax.jit; otherwise the
    mismatch is recorded in MISMATCHES."""
    for form in ("eager", "jit"):
        try:
            jax.jit(lambda: fn())() if form == "jit" else fn()
        except exc as e:
            if text not in str(e):
                MISMATCHES.append(f"{form}: {e!r} lacks {text!r}")
        else:
            MISMATCHES.append(f"{form}: no {exc.__name__}")


def raises(fn, exc, text: str, what: str) -> None:
    """fn() raises exc with text in its message; otherwise the mismatch is recorded."""
    try:
        fn()
    except exc as e:
        if text not in str(e):
            MISMATCHES.append(f"{what}: {e}")
    else:
        MISMATCHES.append(f"{what}: no {exc.__name__}")


def same(got, want, what: str, exact: bool = True) -> None:
    """got equals want: shape, dtype and values (exact; else within the dtype's precision); a
    mismatch is recorded in MISMATCHES (the case fails at its end)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        MISMATCHES.append(f"{what}: {got.shape} {got.dtype} != {want.shape} {want.dtype}")
        return
    a, b = _wide(got), _wide(want)
    if exact:
        ok = np.array_equal(a, b)
    else:
        tol = 1e-2 if want.dtype.itemsize <= 2 else 1e-5
        ok = np.allclose(a, b, rtol=tol, atol=tol)
    if not ok:
        MISMATCHES.append(f"{what}: {got.ravel()[:8]} != {want.ravel()[:8]}")


def eager_lpmpi(coll: str, x: np.ndarray, op: str, root: int, comm, **kw):
    """lpmpi's own Python call on numpy arrays: the result lpmpi.jax must reproduce."""
    if coll == "allreduce":
        return lpmpi.allreduce(x, None, op, comm, **kw)
    if coll == "reduce":
        r = lpmpi.reduce(x, None, op, root, comm, **kw)
        return r if comm.Get_rank() == root else x
    if coll == "bcast":
        return lpmpi.bcast(x.copy(), root, comm)
    if coll == "allgather":
        return lpmpi.allgather(x, None, comm)
    if coll == "alltoall":
        return lpmpi.alltoall(x, None, comm)
    if coll == "gather":
        r = lpmpi.gather(x, None, root, comm)
        return r if comm.Get_rank() == root else x
    if coll == "scatter":       # (off the root x is one block: the result's shape, as mpi4jax)
        me = comm.Get_rank()
        return lpmpi.scatter(x if me == root else None, None if me == root else np.empty_like(x), root, comm)
    return lpmpi.reduce_scatter(x, None, op, comm, **kw)


def jax_input(coll: str, x: np.ndarray, me: int, root: int) -> np.ndarray:
    """Rank me's input of lpmpi.jax's call from its P-block data: scatter's off the root is one
    block (mpi4jax's shapes)."""
    return x[0] if coll == "scatter" and me != root else x


def jax_call(coll: str, op: str, root: int, comm, **kw):
    if coll == "allreduce":
        return lambda a: lj.allreduce(a, op, comm=comm, **kw)
    if coll == "reduce":
        return lambda a: lj.reduce(a, op, root, comm=comm, **kw)
    if coll == "bcast":
        return lambda a: lj.bcast(a, root, comm=comm, **kw)
    if coll == "allgather":
        return lambda a: lj.allgather(a, comm=comm, **kw)
    if coll == "alltoall":
        return lambda a: lj.alltoall(a, comm=comm, **kw)
    if coll == "gather":
        return lambda a: lj.gather(a, root, comm=comm, **kw)
    if coll == "scatter":
        return lambda a: lj.scatter(a, root, comm=comm, **kw)
    return lambda a: lj.reduce_scatter(a, op, comm=comm, **kw)


def expected(coll: str, xs: list[np.ndarray], op: str, root: int, me: int) -> np.ndarray:
    if coll == "allreduce":
        return reference(xs, op)
    if coll == "reduce":
        return reference(xs, op) if me == root else xs[me]
    if coll == "bcast":
        return xs[root]
    if coll == "allgather":
        return np.stack(xs)
    if coll == "alltoall":
        return np.stack([x[me] for x in xs])
    if coll == "gather":
        return np.stack(xs) if me == root else xs[me]
    if coll == "scatter":
        return xs[root][me]
    return reference(xs, op)[me]


def collective_cases(comm, tag: str) -> None:
    """Every collective x op x count, every dtype: one jitted function per (collective, op,
    count) runs it on the inputs of every dtype the pairing takes (one compilation, not one per
    dtype), each result against the reference and the eager lpmpi call on numpy arrays (the
    same engine: bit-identical); the pairings lpmpi refuses raise the same TypeError in
    lpmpi.jax, eagerly and when traced; at count 7 each dtype eagerly too."""
    n, me = comm.Get_size(), comm.Get_rank()
    root = n - 1
    for coll in ("allreduce", "reduce", "bcast", "allgather", "reduce_scatter", "alltoall", "gather", "scatter"):
        ops = OPS if coll in ("allreduce", "reduce", "reduce_scatter") else ("-",)
        for op in ops:
            opn = "sum" if op == "-" else op
            for count in COUNTS:
                shape = (n, count) if coll in ("reduce_scatter", "alltoall", "scatter") else (count,)
                dts = [dt for dt in DTYPES
                       if count <= 7 or dt in ("float32", "int32", "bfloat16", "uint8")]

                def one(coll=coll, opn=opn, count=count, shape=shape, dts=dts):
                    f = jax_call(coll, opn, root, comm)
                    take, xs, wants = [], {}, {}
                    for dt in dts:
                        xs[dt] = [data(q, shape, dt) for q in range(n)]
                        try:
                            wants[dt] = eager_lpmpi(coll, jax_input(coll, xs[dt][me], me, root), opn, root, comm)
                        except TypeError as e:       # a pairing lpmpi refuses: so must lpmpi.jax
                            for form in ("eager", "jit"):
                                try:
                                    (jax.jit(f) if form == "jit" else f)(
                                        jnp.asarray(jax_input(coll, xs[dt][me], me, root)))
                                except TypeError as e2:
                                    if str(e2) != str(e):
                                        MISMATCHES.append(f"{dt} {form}: {e2} != {e}")
                                else:
                                    MISMATCHES.append(f"{dt} {form}: no TypeError ({e})")
                            continue
                        take.append(dt)
                        exact = opn not in ("sum", "avg", "prod") or dt not in (
                            "float16", "bfloat16", "float32", "float64", "complex64", "complex128")
                        same(wants[dt], expected(coll, xs[dt], opn, root, me),
                             f"{dt}: eager lpmpi vs reference", exact)
                    got = jax.jit(lambda *a: [f(v) for v in a])(
                        *[jnp.asarray(jax_input(coll, xs[dt][me], me, root)) for dt in take])
                    for dt, g in zip(take, got):
                        same(g, np.asarray(wants[dt]), f"{dt}: jit vs eager lpmpi")
                    if count == 7:
                        for dt in take:
                            same(f(jnp.asarray(jax_input(coll, xs[dt][me], me, root))), np.asarray(wants[dt]),
                                 f"{dt}: eager lpmpi.jax")

                case(f"{tag} {coll} {op} n={count}", one)


def acc_cases(comm, tag: str) -> None:
    me = comm.Get_rank()
    for dt in ("float16", "bfloat16"):
        for coll in ("allreduce", "reduce", "reduce_scatter"):
            for op in ("sum", "avg"):
                def one(dt=dt, coll=coll, op=op):
                    n = comm.Get_size()
                    shape = (n, 1001) if coll == "reduce_scatter" else (1001,)
                    x = data(me, shape, dt, salt=1) / np.asarray(3, npdt(dt))
                    want = eager_lpmpi(coll, x, op, 0, comm, acc_dtype="float32")
                    f = jax_call(coll, op, 0, comm, acc_dtype="float32")
                    same(jax.jit(f)(jnp.asarray(x)), np.asarray(want), "acc jit vs eager")
                case(f"{tag} acc {coll} {dt} {op}", one)


def compression_cases(comm, tag: str) -> None:
    """compression= under jit: the same bits as lpmpi's eager call (one engine, one schedule),
    within the two-roundings bound of the float64 reference, identical on every rank."""
    me, n = comm.Get_rank(), comm.Get_size()
    for comp in ("bf16", "int8", "int4"):
        for coll in ("allreduce", "reduce_scatter", "allgather"):
            for dt in ("float32", "float16"):
                if comp == "bf16" and dt == "float16":
                    continue
                def one(comp=comp, coll=coll, dt=dt):
                    count = 1001                 # odd: blocks straddle the segments
                    shape = (n, count) if coll == "reduce_scatter" else (count,)
                    xs = [data(q, shape, dt, salt=2) for q in range(n)]
                    op = "avg" if coll == "reduce_scatter" else "sum"
                    if coll == "allgather":
                        want = lpmpi.allgather(xs[me], None, comm, compression=comp)
                    else:
                        want = eager_lpmpi(coll, xs[me], op, 0, comm, compression=comp)
                    f = jax_call(coll, op, 0, comm, compression=comp)
                    got = np.asarray(jax.jit(f)(jnp.asarray(xs[me])))
                    same(got, np.asarray(want), f"{comp} jit vs eager")
                    ref = expected(coll, xs, op, 0, me).astype(np.float64)
                    mag = expected(coll, [abs(x.astype(np.float64)) for x in xs], op, 0, me)
                    err = np.abs(got.astype(np.float64) - ref)
                    # loose: int4's two roundings are 1/14 of block maxima; ranks' magnitudes sum
                    tol = {"bf16": 2 ** -7, "int8": 0.02, "int4": 0.3}[comp]
                    bound = tol * (mag.max() + np.abs(ref).max()) + 1e-3
                    if not (err <= bound).all():
                        MISMATCHES.append(f"{comp}: error {err.max()} > {bound}")
                    every = comm.allgather(got.tobytes())
                    if coll != "reduce_scatter" and any(b != every[0] for b in every):
                        MISMATCHES.append(f"{comp}: results differ between ranks")
                case(f"{tag} compression {comp} {coll} {dt}", one)
    x = jnp.ones(4, jnp.float32)
    bad = {"unknown": (lambda: lj.allreduce(x, "sum", compression="fp8"), ValueError,
                       "compression must be None or one of"),
           "integers": (lambda: lj.allreduce(jnp.ones(4, jnp.int32), "sum", compression="int8"),
                        TypeError, "floating data"),
           "op": (lambda: lj.allreduce(x, "max", compression="int8"), TypeError, "sum and avg"),
           "narrower": (lambda: lj.allgather(jnp.ones(4, jnp.bfloat16), compression="bf16"),
                        TypeError, "narrower"),
           "algorithm": (lambda: lj.allreduce(x, "sum", algorithm="ring", compression="int8"),
                         ValueError, "'auto' or 'direct'")}
    for name, (fn, exc, text) in bad.items():
        case(f"{tag} compression error {name}", lambda fn=fn, exc=exc, text=text: raises_both(fn, exc, text))


def vmap_cases() -> None:
    me = RANK
    xs = [data(q, (3, 5), "float32") for q in range(P)]

    def allreduce_axes():
        for ax in (0, 1):
            got = jax.jit(jax.vmap(lambda a: lj.allreduce(a, MPI.SUM), in_axes=ax))(xs[me])
            want = reference(xs, "sum")
            same(got, want if ax == 0 else want.T, f"vmap in_axes={ax}")
    case("vmap allreduce", allreduce_axes)

    def allgather_axes():
        got = jax.vmap(lambda a: lj.allgather(a), in_axes=1)(xs[me])      # batch of 5
        same(got, np.stack(xs).transpose(2, 0, 1), "vmap allgather")
    case("vmap allgather", allgather_axes)

    def reduce_scatter_axes():
        ys = [data(q, (4, P, 2), "int32") for q in range(P)]              # batch 4, P blocks
        got = jax.jit(jax.vmap(lambda a: lj.reduce_scatter(a, "sum")))(ys[me])
        same(got, reference(ys, "sum")[:, me], "vmap reduce_scatter")
    case("vmap reduce_scatter", reduce_scatter_axes)

    def alltoall_axes():
        ys = [data(q, (4, P, 2), "int32") for q in range(P)]              # batch 4, P blocks
        got = jax.jit(jax.vmap(lambda a: lj.alltoall(a)))(ys[me])
        same(got, np.stack([y[:, me] for y in ys], axis=1), "vmap alltoall")
    case("vmap alltoall", alltoall_axes)

    def bcast_reduce():
        got = jax.vmap(lambda a: lj.bcast(a, 0), in_axes=1, out_axes=1)(xs[me])
        same(got, xs[0], "vmap bcast")
        got = jax.vmap(lambda a: lj.reduce(a, "max", P - 1))(xs[me])
        same(got, reference(xs, "max") if me == P - 1 else xs[me], "vmap reduce")
    case("vmap bcast reduce", bcast_reduce)

    def gather_scatter_axes():
        got = jax.jit(jax.vmap(lambda a: lj.gather(a, P - 1), in_axes=1))(xs[me])     # batch of 5
        same(got, np.stack(xs).transpose(2, 0, 1) if me == P - 1 else xs[me].T, "vmap gather")
        ys = [data(q, (4, P, 2), "int32") for q in range(P)]              # batch 4, P blocks
        got = jax.jit(jax.vmap(lambda a: lj.scatter(a, 0)))(ys[me] if me == 0 else ys[me][:, 0])
        same(got, ys[0][:, me], "vmap scatter")
    case("vmap gather scatter", gather_scatter_axes)


def ad_cases() -> None:
    me = RANK
    x = jnp.asarray(data(me, (6,), "float32"))

    def grad():
        # d/dx sum(allreduce(x * x)) with the cotangent replicated: 2 x on every rank
        g = jax.jit(jax.grad(lambda a: lj.allreduce(a * a, MPI.SUM).sum()))(x)
        same(g, np.asarray(2 * x), "grad")
    case("grad allreduce", grad)

    def jvp():
        t = jnp.asarray(data(me, (6,), "float32", salt=2))
        y, ty = jax.jvp(lambda a: lj.allreduce(a, MPI.SUM), (x,), (t,))
        ts = [data(q, (6,), "float32", salt=2) for q in range(P)]
        same(ty, reference(ts, "sum"), "jvp tangent")
        same(y, reference([data(q, (6,), "float32") for q in range(P)], "sum"), "jvp primal")
    case("jvp allreduce", jvp)

    def transpose():
        f = lambda a: lj.allreduce(a, MPI.SUM)                         
        (ct,) = jax.linear_transpose(f, x)(x)
        same(ct, np.asarray(x), "transpose = identity")
        (ct2,) = jax.linear_transpose(lambda a: jax.linear_transpose(f, x)(a)[0], x)(x)
        same(ct2, reference([data(q, (6,), "float32") for q in range(P)], "sum"),
             "transpose of transpose = allreduce")
    case("linear_transpose allreduce", transpose)

    def not_sum():
        for what, fn in (("grad", lambda: jax.grad(lambda a: lj.allreduce(a, MPI.MAX).sum())(x)),
                         ("transpose", lambda: jax.linear_transpose(
                             lambda a: lj.allreduce(a, MPI.MAX), x)(x))):
            raises(fn, NotImplementedError, "SUM", f"{what} of a MAX allreduce")
    case("grad and transpose of a MAX allreduce refused", not_sum)


def order_cases() -> None:
    me = RANK

    def one_function():
        # independent collectives (no data dependence): only the effect orders them; roots and
        # sizes differ, so a reordering on any rank would mismatch or deadlock
        def f(a):
            outs = []
            for k in range(8):
                outs.append(lj.bcast(a[: k + 1] * (k + 1), k % P))
                outs.append(lj.allreduce(a[: 8 - k], "max"))
            return outs
        got = jax.jit(f)(jnp.asarray(data(me, (8,), "int32")))
        for k in range(8):
            same(got[2 * k], data(k % P, (8,), "int32")[: k + 1] * (k + 1), f"bcast {k}")
            same(got[2 * k + 1], reference([data(q, (8,), "int32")[: 8 - k] for q in range(P)],
                                           "max"), f"allreduce {k}")
    case("order in one jitted function", one_function)

    def across_functions():
        # two jitted functions dispatched alternately without waiting (JAX runs them
        # asynchronously): program order holds across them
        f = jax.jit(lambda a: lj.bcast(a, 0))
        g = jax.jit(lambda a: lj.allreduce(a[:3], "sum"))
        x = jnp.asarray(data(me, (5,), "int32"))
        outs = [(f(x), g(x)) for _ in range(20)]
        for a, b in outs:
            same(a, data(0, (5,), "int32"), "bcast")
            same(b, reference([data(q, (5,), "int32")[:3] for q in range(P)], "sum"), "allreduce")
    case("order across jitted functions", across_functions)

    def in_loop():
        body = lambda i, a: lj.allreduce(a, "sum", in_place=True) / P
        got = jax.jit(lambda a: jax.lax.fori_loop(0, 5, body, a))(jnp.ones(4) * (me + 1))
        v = np.ones(4) * (P + 1) / 2            # the mean of 1..P, kept by every iteration
        same(got, v.astype(np.float32), "fori_loop of allreduce", exact=False)
    case("collective in fori_loop", in_loop)

    def in_place():
        x = jnp.asarray(data(me, (9,), "float32"))
        want = reference([data(q, (9,), "float32") for q in range(P)], "sum")
        same(jax.jit(lambda a: lj.allreduce(a, "sum", in_place=True))(x), want, "in_place")
        same(jax.jit(lambda a: lj.allreduce(a, "sum", in_place=True) + a)(x), want + x,
             "in_place, input still needed")
        same(x, data(me, (9,), "float32"), "input untouched")
        b = jax.jit(lambda a: lj.bcast(a, 0, in_place=True))(x)
        same(b, data(0, (9,), "float32"), "bcast in_place")
        r = jax.jit(lambda a: lj.reduce(a, "sum", 0, in_place=True))(x)
        same(r, want if me == 0 else np.asarray(x), "reduce in_place")
    case("in_place", in_place)


def error_cases() -> None:
    """Argument errors: raised when the call is traced, on every rank, before anything runs
    (the next collective still works)."""
    x = jnp.ones(4, jnp.float32)
    bad = {
        "op on dtype": (lambda: lj.allreduce(jnp.ones(2, jnp.complex64), "max"), TypeError,
                        "not defined on dtype complex64"),
        "root": (lambda: lj.bcast(x, P), ValueError, "out of range"),
        "algorithm": (lambda: lj.allreduce(x, "sum", algorithm="nope"), ValueError, "algorithm"),
        "chunk_bytes": (lambda: lj.allreduce(x, "sum", chunk_bytes=0), ValueError, "chunk_bytes"),
        "acc_dtype": (lambda: lj.allreduce(x, "sum", acc_dtype="float32"), TypeError,
                      "float16 or bfloat16"),
        "reduce_scatter shape": (lambda: lj.reduce_scatter(jnp.ones((P + 1, 2)), "sum"),
                                 ValueError, "(P, ...)"),
        "comm": (lambda: lj.allreduce(x, "sum", comm=3), TypeError, "comm"),
        "in_place": (lambda: lj.allreduce(x, "sum", in_place=1), TypeError, "in_place"),
        "op": (lambda: lj.allreduce(x, "nope"), ValueError, "op must be"),
        "x": (lambda: lj.allreduce(object(), "sum"), TypeError, "x must be"),
    }
    for name, (fn, exc, text) in bad.items():
        def one(fn=fn, exc=exc, text=text):
            raises_both(fn, exc, text)
            same(lj.allreduce(jnp.ones(2, jnp.int32), "sum"), np.full(2, P, np.int32), "after")
        case(f"error {name}", one)


def mpi4jax_form_cases() -> None:
    """mpi4jax 0.9's call forms: MPI ops, positional root, comm keyword, Python scalars, the
    default communicator (a clone of COMM_WORLD); with mpi4jax installed, the same calls there
    give the same results."""
    me = RANK
    comm = WORLD.Clone()
    libs = [lj] + ([mpi4jax] if mpi4jax is not None else [])

    def scalars():
        for lib in libs:
            same(lib.allreduce(1.0, op=MPI.SUM), np.float32(P), f"{lib.__name__} scalar")
            same(jax.jit(lambda a, lib=lib: lib.allreduce(a, op=MPI.MAX))(me),
                 np.int32(P - 1), f"{lib.__name__} jit int scalar")
    case("mpi4jax form: scalars", scalars)

    def forms():
        x = jnp.asarray(data(me, (3, 4), "float32"))
        outs = []
        for lib in libs:
            outs.append([np.asarray(v) for v in (
                lib.allreduce(x, op=MPI.SUM, comm=comm),
                jax.jit(lambda a, lib=lib: lib.allreduce(a, MPI.PROD))(x),
                lib.bcast(x, 0, comm=comm),
                jax.jit(lambda a, lib=lib: lib.bcast(a, P - 1))(x),
                lib.reduce(x, MPI.MIN, 0, comm=comm),
                jax.jit(lambda a, lib=lib: lib.reduce(a, MPI.SUM, P - 1))(x),
                lib.allgather(x, comm=comm),
                jax.jit(lambda a, lib=lib: lib.allgather(a))(x),
            )])
        xs = [data(q, (3, 4), "float32") for q in range(P)]
        want = [reference(xs, "sum"), reference(xs, "prod"), xs[0], xs[P - 1],
                reference(xs, "min") if me == 0 else xs[me],
                reference(xs, "sum") if me == P - 1 else xs[me], np.stack(xs), np.stack(xs)]
        for i, w in enumerate(want):
            same(outs[0][i], w, f"lpmpi.jax call {i}")
            for other in outs[1:]:
                same(other[i], outs[0][i], f"mpi4jax call {i} differs from lpmpi.jax")
    case("mpi4jax forms", forms)

    def grad_vmap():
        x = jnp.asarray(data(me, (4,), "float32"))
        for lib in libs:
            g = jax.grad(lambda a, lib=lib: (lib.allreduce(a, op=MPI.SUM) ** 2).sum())(x)
            s = reference([data(q, (4,), "float32") for q in range(P)], "sum")
            same(g, 2 * s, f"{lib.__name__} grad")
            v = jax.vmap(lambda a, lib=lib: lib.allreduce(a, op=MPI.SUM))(jnp.stack([x, 2 * x]))
            same(v, np.stack([s, 2 * s]), f"{lib.__name__} vmap")
    case("mpi4jax forms: grad, vmap", grad_vmap)

    def gather_scatter_alltoall():
        # the shapes and results mpi4jax's own tests (tests/collective_ops/test_gather.py,
        # test_scatter.py, test_alltoall.py) check, eagerly and under jit, on every library here
        for lib in libs:
            name = lib.__name__
            arr = jnp.ones((3, 2)) * me
            for form, g in (("eager", lambda a, lib=lib: lib.gather(a, root=0)),
                            ("jit", jax.jit(lambda a, lib=lib: lib.gather(a, root=0)))):
                res = g(arr)
                if me == 0:
                    same(res, np.stack([np.ones((3, 2), np.float32) * p for p in range(P)]), f"{name} gather {form}")
                else:
                    same(res, arr, f"{name} gather {form} off the root")
                res = g(me)                                     # a Python scalar
                same(res, np.arange(P, dtype=np.int32) if me == 0 else np.int32(me), f"{name} gather scalar {form}")
            src = jnp.stack([jnp.ones((3, 2)) * r for r in range(P)]) if me == 0 else jnp.ones((3, 2)) * me
            for form, sc in (("eager", lambda a, lib=lib: lib.scatter(a, root=0)),
                             ("jit", jax.jit(lambda a, lib=lib: lib.scatter(a, root=0)))):
                same(sc(src), np.ones((3, 2), np.float32) * me, f"{name} scatter {form}")
            if me == 0:
                raises(lambda lib=lib: lib.scatter(jnp.ones((P + 1,)), root=0), ValueError,
                       "Scatter input must have shape", f"{name} scatter of P + 1 blocks")
            arr = jnp.ones((P, 3, 2)) * me
            for form, a2a in (("eager", lambda a, lib=lib: lib.alltoall(a)),
                              ("jit", jax.jit(lambda a, lib=lib: lib.alltoall(a)))):
                same(a2a(arr), np.stack([np.ones((3, 2), np.float32) * p for p in range(P)]), f"{name} alltoall {form}")
            raises(lambda lib=lib: lib.alltoall(jnp.ones((P + 1,))), ValueError,
                   "must have shape (nproc, ...)", f"{name} alltoall of P + 1 blocks")
    case("mpi4jax forms: gather, scatter, alltoall", gather_scatter_alltoall)

    def allgatherv():
        counts = [(q * 2 + 1) % 4 for q in range(P)]                     # 1, 3, 1, 3 ...: uneven
        xs = [data(q, (counts[q], 3), "float32") for q in range(P)]
        want = np.concatenate(xs, axis=0)
        for form, f in (("eager", lambda a: lj.allgatherv(a, counts)),
                        ("jit", jax.jit(lambda a: lj.allgatherv(a, counts)))):
            same(f(jnp.asarray(xs[me])), want, f"allgatherv {form}")
        zero = [0] * P
        same(lj.allgatherv(jnp.zeros((0, 3)), zero), np.zeros((0, 3), np.float32), "allgatherv of nothing")
        raises_both(lambda: lj.allgatherv(jnp.ones((counts[me] + 1, 3)), counts), ValueError, "rows along axis 0")
        raises_both(lambda: lj.allgatherv(jnp.ones((counts[me], 3)), counts[:-1]), ValueError, "one per rank")
    case("allgatherv (uneven counts)", allgatherv)
    comm.Free()


def comm_cases() -> None:
    if P < 2:
        return
    sub = WORLD.Split(RANK % 2, RANK)
    collective_cases(sub, "split") if not QUICK else None

    def freed():
        c = WORLD.Dup()
        f = jax.jit(lambda a: lj.allreduce(a, "sum", comm=c))
        same(f(jnp.ones(3)), np.full(3, P, np.float32), "before free")
        c.Free()
        try:
            f(jnp.ones(3)).block_until_ready()
        except Exception as e:  # noqa: BLE001 - JAX's runtime error type differs by version
            assert "not prepared by lpmpi.jax or has been freed" in str(e), str(e)
        else:
            raise AssertionError("a freed communicator ran")
    case("freed communicator refused by the handler", freed)
    sub.Free()


def main() -> None:
    collective_cases(lj.default_comm(), "world")
    if X64:
        return finish()
    acc_cases(lj.default_comm(), "world")
    compression_cases(lj.default_comm(), "world")
    vmap_cases()
    ad_cases()
    order_cases()
    error_cases()
    mpi4jax_form_cases()
    comm_cases()
    finish()


def finish() -> None:
    nf = WORLD.allreduce(len(FAILS))
    if RANK == 0:
        print(f"SUMMARY suite=jax P={P} x64={int(X64)} jax={jax.__version__} cases={NCASES} "
              f"failures={nf}",
              flush=True)
    sys.exit(1 if nf else 0)


if __name__ == "__main__":
    main()
