"""Single-process tests of the public API (no mpiexec: importing lpmpi initializes MPI as a
singleton, so COMM_WORLD has size 1).  Multi-process behaviour is in the spawning tests."""
import array
import operator
import pickle
import re

import numpy as np
import pytest
from mpi4py import MPI

import lpmpi

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BF16 = None

SELF = MPI.COMM_SELF
EXPECTED_ALGS = {
    "allreduce": {"lp", "mst", "be", "ring", "native"},
    "reduce": {"lp", "mst", "be", "native"},
    "bcast": {"lp", "mst", "be", "native"},
    "allgather": {"ring", "native"},
    "reduce_scatter": {"ring", "native"},
    "alltoall": {"pairwise", "native"},
    "alltoallv": {"pairwise", "native"},
    "allgatherv": {"ring", "native"},
    "reduce_scatter_v": {"ring", "native"},
    "gather": {"linear", "native"},
    "scatter": {"linear", "native"},
}
OPS = ("sum", "prod", "max", "min", "avg", "land", "lor", "lxor", "band", "bor", "bxor")
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
VALID = {
    "b": {"max", "min", "land", "lor", "lxor", "band", "bor", "bxor"},
    "i": {"sum", "prod", "max", "min", "land", "lor", "lxor", "band", "bor", "bxor"},
    "f": {"sum", "prod", "max", "min", "avg"},
    "c": {"sum", "prod", "avg"},
}
ALL_ALGS = sorted(set().union(*EXPECTED_ALGS.values())) + ["auto"]


def dtype_of(name):
    if name == "bfloat16":
        if BF16 is None:
            pytest.skip("bfloat16 needs ml_dtypes, which is not importable")
        return BF16
    return np.dtype(name)


def kind(dt):
    if dt == np.dtype(bool):
        return "b"
    if BF16 is not None and dt == BF16:
        return "f"
    return {"i": "i", "u": "i", "f": "f", "c": "c"}[dt.kind]


def names(msg, *args):
    return any(re.search(r"(?<![A-Za-z0-9])" + re.escape(a) + r"(?![A-Za-z0-9])", msg)
               for a in args)


def sample(dt, n=11, seed=0):
    rng = np.random.default_rng(seed)
    k = kind(dt)
    if k == "b":
        return rng.random(n) < 0.5
    if k == "i":
        return rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt).copy()
    if k == "f":
        return rng.uniform(-4, 4, n).astype(dt)
    return (rng.uniform(-4, 4, n) + 1j * rng.uniform(-4, 4, n)).astype(dt)


def single_rank_result(x, op):
    """What a reduction over one rank gives."""
    if op in ("land", "lor", "lxor"):
        return (x != 0).astype(x.dtype)
    return x


# ------------------------------------------------------------------------------ names

def test_public_names():
    for name in ("allreduce", "reduce", "bcast", "algorithms", "select", "IN_PLACE", "SUM",
                 "PROD", "MAX", "MIN", "AVG", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
                 "LPError", "MismatchError"):
        assert hasattr(lpmpi, name), name


def test_in_place_is_mpi_in_place():
    assert lpmpi.IN_PLACE is MPI.IN_PLACE


def test_ops_are_distinct():
    ops = [getattr(lpmpi, o.upper()) for o in OPS]
    for i, a in enumerate(ops):
        for b in ops[i + 1:]:
            assert a is not b and a != b


def test_exception_hierarchy():
    assert issubclass(lpmpi.LPError, RuntimeError)
    assert issubclass(lpmpi.MismatchError, ValueError)
    assert not issubclass(lpmpi.MismatchError, lpmpi.LPError)


@pytest.mark.parametrize("cls", ["LPError", "MismatchError"])
def test_exceptions_pickle(cls):
    exc_type = getattr(lpmpi, cls)
    e = exc_type("something failed: MPI_ERR_TRUNCATE")
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is exc_type
    assert str(e2) == str(e)
    assert e2.args == e.args


# ------------------------------------------------------------------------------ algorithms

@pytest.mark.parametrize("coll", sorted(EXPECTED_ALGS))
def test_algorithms(coll):
    algs = lpmpi.algorithms(coll)
    assert isinstance(algs, tuple)
    assert all(isinstance(a, str) for a in algs)
    assert len(set(algs)) == len(algs), algs
    assert "auto" not in algs
    assert EXPECTED_ALGS[coll] <= set(algs), f"missing: {EXPECTED_ALGS[coll] - set(algs)}"
    if coll in ("reduce", "bcast"):
        assert "ring" not in algs


@pytest.mark.parametrize("bad", ["alltoallw", "", "exscan", "Allgather"])
def test_algorithms_unknown_collective(bad):
    with pytest.raises(ValueError):
        lpmpi.algorithms(bad)


@pytest.mark.parametrize("bad", [None, 3])
def test_algorithms_bad_type(bad):
    with pytest.raises((TypeError, ValueError)):
        lpmpi.algorithms(bad)


@pytest.mark.parametrize("coll", sorted(EXPECTED_ALGS))
@pytest.mark.parametrize("nbytes", [0, 1, 7, 4096, 1 << 20, (1 << 31) + 3, 1 << 34])
@pytest.mark.parametrize("comm", [None, "world", "self"])
def test_select(coll, nbytes, comm):
    c = {None: None, "world": MPI.COMM_WORLD, "self": SELF}[comm]
    res = lpmpi.select(coll, nbytes, c)
    assert isinstance(res, tuple) and len(res) == 2, res
    alg, chunk = res
    assert alg in lpmpi.algorithms(coll), res
    assert chunk is None or (isinstance(chunk, int) and not isinstance(chunk, bool)
                             and chunk >= 0), res
    assert lpmpi.select(coll, nbytes, c) == res  # deterministic
    assert lpmpi.select(coll, nbytes, comm=c, memory="host") == res


def test_select_unknown_collective():
    with pytest.raises(ValueError):
        lpmpi.select("alltoallw", 1024)


# ------------------------------------------------------------------------------ results, P=1

def pairs():
    for dtn in DTYPES + ["bfloat16"]:
        for op in OPS:
            yield dtn, op


@pytest.mark.parametrize("dtn,op", list(pairs()))
def test_pairings_on_comm_self(dtn, op):
    """Every dtype x op: valid pairings reduce (one rank: the input, logical ops give 0/1),
    the others raise TypeError naming the op, for allreduce and reduce, before writing."""
    dt = dtype_of(dtn)
    x = sample(dt)
    before = x.tobytes()
    if op in VALID[kind(dt)]:
        for alg in ("auto", "lp", "native"):
            y = lpmpi.allreduce(x, op=op, comm=SELF, algorithm=alg, chunk_bytes=4)
            exp = single_rank_result(x, op)
            assert y.dtype == dt
            if kind(dt) in "fc":
                wide = np.complex128 if kind(dt) == "c" else np.float64
                np.testing.assert_array_equal(y.astype(wide), exp.astype(wide))
            else:
                assert y.tobytes() == exp.tobytes(), (y, exp)
            z = np.empty_like(x)
            assert lpmpi.reduce(x, z, op, 0, SELF, algorithm=alg) is z
            assert z.tobytes() == y.tobytes()
        assert x.tobytes() == before
    else:
        y = np.full_like(x, 1)
        yb = y.tobytes()
        calls = (lambda o: lpmpi.allreduce(x, y, o, SELF),
                 lambda o: lpmpi.reduce(x, y, o, root=0, comm=SELF),
                 lambda o: lpmpi.allreduce(lpmpi.IN_PLACE, x, o, SELF))
        spellings = (getattr(lpmpi, op.upper()), op) + (
            (getattr(MPI, op.upper()),) if op != "avg" else ())
        for fn in calls:
            for spelled in spellings:
                with pytest.raises(TypeError) as ei:
                    fn(spelled)
                assert names(str(ei.value), "op", "dtype", "sendbuf", "recvbuf"), ei.value
                assert x.tobytes() == before and y.tobytes() == yb


@pytest.mark.parametrize("op", OPS)
def test_op_spellings(op):
    dt = np.dtype(np.float64) if op in VALID["f"] else np.dtype(np.int32)
    x = sample(dt)
    spellings = [getattr(lpmpi, op.upper()), op]
    if op != "avg":
        spellings.append(getattr(MPI, op.upper()))
    results = [lpmpi.allreduce(x, op=s, comm=SELF).tobytes() for s in spellings]
    assert len(set(results)) == 1
    assert results[0] == single_rank_result(x, op).tobytes()


def test_default_comm_is_world_and_default_op_is_sum():
    x = np.arange(10, dtype=np.int64)
    assert np.array_equal(lpmpi.allreduce(x), x)
    assert np.array_equal(lpmpi.reduce(x), x)
    b = x.copy()
    assert lpmpi.bcast(b) is b and np.array_equal(b, x)


def test_positional_signatures():
    x = np.arange(6.0)
    y = np.zeros(6)
    assert lpmpi.allreduce(x, y, lpmpi.MAX, SELF) is y
    assert np.array_equal(y, x)
    z = np.zeros(6)
    assert lpmpi.reduce(x, z, "min", 0, SELF) is z and np.array_equal(z, x)
    b = x.copy()
    assert lpmpi.bcast(b, 0, SELF) is b


def test_algorithm_and_chunk_are_keyword_only():
    x = np.arange(6.0)
    with pytest.raises(TypeError):
        lpmpi.allreduce(x, None, "sum", SELF, "lp")
    with pytest.raises(TypeError):
        lpmpi.reduce(x, None, "sum", 0, SELF, "lp")
    with pytest.raises(TypeError):
        lpmpi.bcast(x, 0, SELF, "lp")


@pytest.mark.parametrize("mode", ["IN_PLACE", "same"])
def test_in_place_forms(mode):
    x = np.arange(7, dtype=np.float32)
    exp = x.copy()
    res = (lpmpi.allreduce(lpmpi.IN_PLACE, x, comm=SELF) if mode == "IN_PLACE"
           else lpmpi.allreduce(x, x, comm=SELF))
    assert res is x and np.array_equal(x, exp)
    res = (lpmpi.reduce(lpmpi.IN_PLACE, x, comm=SELF) if mode == "IN_PLACE"
           else lpmpi.reduce(x, x, comm=SELF))
    assert res is x and np.array_equal(x, exp)


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (5,), (3, 4), (2, 3, 5)])
def test_recvbuf_none_allocates_like_input(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    for fn in (lpmpi.allreduce, lpmpi.reduce):
        y = fn(x, comm=SELF)
        assert type(y) is np.ndarray and y.shape == shape and y.dtype == x.dtype
        assert y is not x and np.array_equal(y, x)


def test_recv_shape_may_differ_when_count_agrees():
    x = np.arange(12.0).reshape(3, 4)
    y = np.zeros((2, 6))
    assert lpmpi.allreduce(x, y, comm=SELF) is y
    assert np.array_equal(y.reshape(-1), x.reshape(-1))


@pytest.mark.parametrize("make,dtype", [
    (lambda: bytearray(b"\x01\x02\x03\xff"), np.uint8),
    (lambda: b"\x01\x02\x03\xff", np.uint8),
    (lambda: array.array("d", [1.5, -2.0, 3.25]), np.float64),
    (lambda: array.array("f", [1.5, -2.0]), np.float32),
    (lambda: array.array("i", [1, -2, 3]), np.intc),
    (lambda: array.array("q", [1, -2, 1 << 40]), np.int64),
    (lambda: array.array("H", [1, 65535]), np.uint16),
    (lambda: memoryview(np.arange(6, dtype=np.complex64)), np.complex64),
])
def test_buffer_protocol_inputs(make, dtype):
    x = make()
    ref = np.asarray(memoryview(x)).copy()
    y = lpmpi.allreduce(x, comm=SELF, op="max" if dtype != np.complex64 else "sum")
    assert type(y) is np.ndarray and y.dtype == np.dtype(dtype) and y.shape == ref.shape
    assert np.array_equal(y, ref)
    y = lpmpi.reduce(x, comm=SELF, op="sum")
    assert type(y) is np.ndarray and y.dtype == np.dtype(dtype)
    if not isinstance(x, bytes):
        out = make()
        assert lpmpi.allreduce(x, out, comm=SELF) is out
        assert lpmpi.bcast(out, comm=SELF) is out
        assert lpmpi.allreduce(lpmpi.IN_PLACE, out, comm=SELF) is out


@pytest.mark.parametrize("chunk", [1, 3, 4, 7, 8, 12, 1000, 1 << 30, np.int64(64), np.uint16(8)])
@pytest.mark.parametrize("alg", ALL_ALGS)
def test_chunk_bytes_any_positive_int(alg, chunk):
    x = np.arange(25, dtype=np.float64)
    for coll in ("allreduce", "reduce", "bcast"):
        if alg != "auto" and alg not in lpmpi.algorithms(coll):
            continue
        if coll == "bcast":
            b = x.copy()
            lpmpi.bcast(b, comm=SELF, algorithm=alg, chunk_bytes=chunk)
            assert np.array_equal(b, x)
        else:
            fn = getattr(lpmpi, coll)
            assert np.array_equal(fn(x, comm=SELF, algorithm=alg, chunk_bytes=chunk), x)


# ------------------------------------------------------------------------------ errors, P=1

def _errcase(fn, bufs, argnames, types=(TypeError, ValueError)):
    snaps = [bytes(memoryview(b)) if b is not None else None for b in bufs]
    with pytest.raises(types) as ei:
        fn()
    assert not isinstance(ei.value, lpmpi.MismatchError)
    assert names(str(ei.value), *argnames), f"{ei.value!r} names none of {argnames}"
    for b, s in zip(bufs, snaps):
        if b is not None:
            assert bytes(memoryview(b)) == s, "buffer modified by a failed call"


def ro(a):
    a = a.copy()
    a.flags.writeable = False
    return a


X = np.arange(10, dtype=np.float64)

REDUCTION_ERRORS = {
    "sendbuf_list": (lambda f, y: f([1.0, 2.0], y), ("sendbuf",)),
    "sendbuf_none": (lambda f, y: f(None, y), ("sendbuf",)),
    "sendbuf_int": (lambda f, y: f(5, y), ("sendbuf",)),
    "sendbuf_object_dtype": (lambda f, y: f(np.zeros(10, object), y), ("sendbuf", "dtype")),
    "sendbuf_str_dtype": (lambda f, y: f(np.array(["a"] * 10), y), ("sendbuf", "dtype")),
    "sendbuf_noncontig": (lambda f, y: f(np.zeros(20)[::2], y), ("sendbuf",)),
    "recv_dtype": (lambda f, y: f(X, np.zeros(10, np.float32)), ("recvbuf", "sendbuf", "dtype")),
    "recv_count_more": (lambda f, y: f(X, np.zeros(11)), ("recvbuf", "sendbuf")),
    "recv_count_less": (lambda f, y: f(X, np.zeros(9)), ("recvbuf", "sendbuf")),
    "recv_readonly": (lambda f, y: f(X, ro(np.zeros(10))), ("recvbuf",)),
    "recv_bytes": (lambda f, y: f(np.zeros(4, np.uint8), b"abcd"), ("recvbuf",)),
    "recv_noncontig": (lambda f, y: f(X, np.zeros(20)[::2]), ("recvbuf",)),
    "recv_list": (lambda f, y: f(X, [0.0] * 10), ("recvbuf",)),
    "in_place_no_recv": (lambda f, y: f(lpmpi.IN_PLACE), ("recvbuf", "sendbuf")),
    "in_place_readonly": (lambda f, y: f(lpmpi.IN_PLACE, ro(X)), ("recvbuf", "sendbuf")),
    "op_unknown": (lambda f, y: f(X, y, "median"), ("op",)),
    "op_int": (lambda f, y: f(X, y, 7), ("op",)),
    "op_replace": (lambda f, y: f(X, y, MPI.REPLACE), ("op",)),
    "op_maxloc": (lambda f, y: f(X, y, MPI.MAXLOC), ("op",)),
    "alg_unknown": (lambda f, y: f(X, y, algorithm="bogus"), ("algorithm",)),
    "alg_int": (lambda f, y: f(X, y, algorithm=2), ("algorithm",)),
    "chunk_zero": (lambda f, y: f(X, y, chunk_bytes=0), ("chunk_bytes",)),
    "chunk_negative": (lambda f, y: f(X, y, algorithm="lp", chunk_bytes=-8), ("chunk_bytes",)),
    "chunk_float": (lambda f, y: f(X, y, algorithm="lp", chunk_bytes=64.0), ("chunk_bytes",)),
    "chunk_str": (lambda f, y: f(X, y, chunk_bytes="64"), ("chunk_bytes",)),
    "comm_null": (lambda f, y: f(X, y, comm=MPI.COMM_NULL), ("comm",)),
    "comm_str": (lambda f, y: f(X, y, comm="world"), ("comm",)),
    "comm_group": (lambda f, y: f(X, y, comm=MPI.COMM_WORLD.Get_group()), ("comm",)),
}


@pytest.mark.parametrize("case", sorted(REDUCTION_ERRORS))
@pytest.mark.parametrize("coll", ["allreduce", "reduce"])
def test_reduction_errors_on_comm_self(coll, case):
    call, argnames = REDUCTION_ERRORS[case]
    y = np.full(10, 3.0)
    fn = getattr(lpmpi, coll)

    def f(*a, **k):
        k.setdefault("comm", SELF)
        return fn(*a, **k)
    _errcase(lambda: call(f, y), [X, y], argnames)


@pytest.mark.parametrize("root", [1, -1, 5, "0", 0.0, None])
@pytest.mark.parametrize("coll", ["reduce", "bcast"])
def test_root_errors_on_comm_self(coll, root):
    b = X.copy()
    if coll == "reduce":
        _errcase(lambda: lpmpi.reduce(X, b, root=root, comm=SELF), [X, b], ("root",))
    else:
        _errcase(lambda: lpmpi.bcast(b, root=root, comm=SELF), [b], ("root",))


def test_ring_is_not_a_reduce_or_bcast_algorithm():
    b = X.copy()
    _errcase(lambda: lpmpi.reduce(X, b, comm=SELF, algorithm="ring"), [X, b], ("algorithm",))
    _errcase(lambda: lpmpi.bcast(b, comm=SELF, algorithm="ring"), [b], ("algorithm",))


@pytest.mark.parametrize("bad", ["readonly", "bytes", "noncontig", "list", "none", "in_place",
                                 "object_dtype"])
def test_bcast_buf_errors_on_comm_self(bad):
    keep = np.zeros(20)
    buf = {"readonly": ro(X), "bytes": b"abcdefgh", "noncontig": keep[::2], "list": [1.0, 2.0],
           "none": None, "in_place": lpmpi.IN_PLACE, "object_dtype": np.zeros(3, object)}[bad]
    bufs = [keep]
    if isinstance(buf, bytes) or (isinstance(buf, np.ndarray) and buf.dtype != object):
        bufs.append(buf)
    _errcase(lambda: lpmpi.bcast(buf, comm=SELF), bufs, ("buf",))


@pytest.mark.parametrize("cb", [0, -1, 1.5, "8", 8.0])
def test_bcast_chunk_errors_on_comm_self(cb):
    b = X.copy()
    _errcase(lambda: lpmpi.bcast(b, comm=SELF, algorithm="lp", chunk_bytes=cb), [b],
             ("chunk_bytes",))


def test_operator_index_used_for_root():
    """numpy integers are ints for root (operator.index), like mpi4py."""
    b = X.copy()
    assert lpmpi.bcast(b, root=np.int64(0), comm=SELF) is b
    assert lpmpi.reduce(X, comm=SELF, root=np.int32(0)) is not None
    assert operator.index(np.int64(0)) == 0


def test_bfloat16_available():
    """bfloat16 cases run only when ml_dtypes is installed."""
    if BF16 is None:
        pytest.skip("ml_dtypes is not importable: bfloat16 cases skipped")
    x = np.arange(8).astype(BF16)
    y = lpmpi.allreduce(x, comm=SELF)
    assert y.dtype == BF16 and np.array_equal(y.astype(np.float32), x.astype(np.float32))
