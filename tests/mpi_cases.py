#!/usr/bin/env python
"""Multi-process test matrices for lpmpi, run inside ONE mpiexec spawn per process count.

    mpiexec -n P python tests/mpi_cases.py SUITE [--stride N] [--filter REGEX] [--list]

Suites: allreduce, reduce, bcast, comms, errors, check, bigmsg, determinism, cases (JSON file
of case dicts, see --cases; used by test_hypothesis.py), device (device-array specifics).

Forms (--form): blocking (the default); nonblocking (every lpmpi.allreduce / reduce / bcast
of the matrices becomes lpmpi.iallreduce / ... followed by wait()); persistent (allreduce_init
/ ... then start() and wait(); twice where the call is not in place, so the restart is checked
too).  Everything else, errors before any communication included, is checked unchanged.

Array backends (--backend): numpy (host memory, the default); torch (PyTorch CPU tensors,
through DLPack); dlpack (numpy arrays behind an object that has only __dlpack__ and
__dlpack_device__); fakedev (HostDeviceArray: __cuda_array_interface__ over host memory, run
with LPMPI_EMULATE_STAGING=1); cupy (device memory on a GPU); torch-cuda (PyTorch CUDA
tensors, through DLPack's device path).  With a backend other than numpy
the numpy buffers of the matrices become that backend's arrays (the other buffer kinds are
skipped).

Every case is run on every rank; each rank catches its own exceptions, then all ranks agree
through an mpi4py allgather, so one failing rank never desynchronizes the others. A failure
prints ``FAIL rank=R case=<description>: <error>``; a case that hangs is reported by a watchdog
thread (``FAIL ... timeout``) which then ends the process. At the end rank 0 prints
``SUMMARY ...`` and every rank exits 1 if any case failed on any rank.

Inputs are generated from (seed, rank) so every rank computes the numpy reference for all
ranks locally.  To rerun one case: ``--filter`` with a regex over its description.
"""
# The harness catches every exception of a case on purpose (BLE001); closures are called
# at once, inside the loop that defines them (B023); case dicts read best as dict(...) (C408).
# ruff: noqa: BLE001, B023, C408
from __future__ import annotations

import argparse
import array
import faulthandler
import hashlib
import json
import os
import re
import sys
import threading
import time
import traceback
import zlib

import numpy as np
from mpi4py import MPI

WORLD = MPI.COMM_WORLD
RANK = WORLD.Get_rank()
SIZE = WORLD.Get_size()

def say(line):
    """One write per line so that lines of different ranks do not interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


try:
    import lpmpi
except Exception:  # report on every rank and exit non-zero, never hang
    say(f"FAIL rank={RANK} case=import lpmpi: {traceback.format_exc()}")
    sys.exit(2)

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except Exception:
    BF16 = None

# --------------------------------------------------------------------------- contract tables

EXPECTED_ALGS = {
    "allreduce": ("lp", "mst", "be", "ring", "native"),
    "reduce": ("lp", "mst", "be", "native"),
    "bcast": ("lp", "mst", "be", "native"),
}

DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64", "complex64", "complex128"]
if BF16 is not None:
    DTYPE_NAMES.append("bfloat16")

OP_NAMES = ("sum", "prod", "max", "min", "avg", "land", "lor", "lxor", "band", "bor", "bxor")
VALID_OPS = {
    "b": ("max", "min", "land", "lor", "lxor", "band", "bor", "bxor"),
    "i": ("sum", "prod", "max", "min", "land", "lor", "lxor", "band", "bor", "bxor"),
    "f": ("sum", "prod", "max", "min", "avg"),
    "c": ("sum", "prod", "avg"),
}

MODES = {
    "allreduce": ("new", "out", "inplace", "same"),
    # reduce: out_root = recvbuf on root only; mixed = root IN_PLACE, others (x, None)
    "reduce": ("new", "out", "out_root", "inplace", "same", "mixed"),
    "bcast": ("buf",),
}


def get_dtype(name):
    if name == "bfloat16":
        if BF16 is None:
            raise RuntimeError("bfloat16 needs ml_dtypes")
        return BF16
    return np.dtype(name)


def kind(dt):
    if dt == np.dtype(bool):
        return "b"
    if dt.kind in "iu":
        return "i"
    if dt.kind == "f" or (BF16 is not None and dt == BF16):
        return "f"
    if dt.kind == "c":
        return "c"
    raise ValueError(dt)


def valid_ops(dtname):
    return VALID_OPS[kind(get_dtype(dtname))]


def eps_of(dt):
    if BF16 is not None and dt == BF16:
        return 2.0 ** -7
    return float(np.finfo(dt).eps)


def tiny_of(dt):
    if BF16 is not None and dt == BF16:
        return 2.0 ** -126
    return float(np.finfo(dt).tiny)


def op_object(name, spell):
    """spell 0: lpmpi.SUM, 1: MPI.SUM (lpmpi.AVG for avg), 2: "sum"."""
    if spell == 2:
        return name
    if spell == 1 and name != "avg":
        return getattr(MPI, name.upper())
    return getattr(lpmpi, name.upper())


def algs_for(coll):
    algs = list(EXPECTED_ALGS[coll])
    try:
        for a in lpmpi.algorithms(coll):
            if a not in algs:
                algs.append(a)
    except Exception:  # noqa: S110 -- algorithms() itself is tested in test_api.py
        pass
    return algs + ["auto"]


# --------------------------------------------------------------------------- inputs / reference

def make_input(seed, rank, dt, opn, count):
    """Deterministic input of `count` elements for `rank` (1-D numpy array of dtype dt)."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, rank, 7])
    k = kind(dt)
    if opn is None:  # bcast: arbitrary bits
        if k == "b":
            return rng.integers(0, 2, count).astype(bool)
        return rng.integers(0, 256, count * dt.itemsize, dtype=np.uint8).view(dt).copy()
    if k == "b":
        p = 0.85 if opn == "land" else 0.5
        return rng.random(count) < p
    if k == "i":
        if opn in ("land", "lor", "lxor"):
            vals = np.array([0, 0, 0, 1, 2, 5, 64, 255], dtype=np.uint64).astype(dt)
            if opn == "lor":
                vals = np.array([0, 0, 0, 0, 0, 0, 3, 1], dtype=np.uint64).astype(dt)
            return vals[rng.integers(0, len(vals), count)]
        # full range: SUM/PROD wrap as in C / numpy
        return rng.integers(0, 256, count * dt.itemsize, dtype=np.uint8).view(dt).copy()
    if k == "f":
        if opn == "prod":
            vals = np.array([1, -1, 2, -2, 0.5, -0.5, 1.5, -1.5, 1, 1])
            return vals[rng.integers(0, len(vals), count)].astype(dt)
        if opn in ("max", "min"):
            x = rng.uniform(-100, 100, count)
            x[rng.random(count) < 0.05] = np.nan
            x[rng.random(count) < 0.02] = np.inf
            x[rng.random(count) < 0.02] = -np.inf
            return x.astype(dt)
        return rng.uniform(-1, 1, count).astype(dt)
    # complex
    if opn == "prod":
        vals = np.array([-1, 0, 1, 1, 1, 2, -1])
        re_ = vals[rng.integers(0, len(vals), count)]
        im_ = vals[rng.integers(0, len(vals), count)]
        return (re_ + 1j * im_).astype(dt)
    return (rng.uniform(-1, 1, count) + 1j * rng.uniform(-1, 1, count)).astype(dt)


def reference(inputs, opn, dt):
    """(expected, bound): bound None means exact (NaN == NaN) comparison."""
    P = len(inputs)
    k = kind(dt)
    X = np.stack(inputs) if inputs[0].size else np.empty((P, 0), dt)
    with np.errstate(all="ignore"):
        if opn in ("land", "lor", "lxor"):
            f = {"land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[opn]
            return f.reduce(X != 0, axis=0).astype(dt), None
        if opn in ("band", "bor", "bxor"):
            f = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[opn]
            return f.reduce(X, axis=0), None
        if opn in ("max", "min"):
            f = np.maximum if opn == "max" else np.minimum
            return f.reduce(X, axis=0), None
        if k in ("i", "b"):
            f = np.add if opn == "sum" else np.multiply
            return f.reduce(X, axis=0, dtype=dt), None
        if opn == "prod":  # inputs chosen so that every product is exact
            wide = np.complex128 if k == "c" else np.float64
            return np.multiply.reduce(X.astype(wide), axis=0).astype(dt), None
        wide = np.complex128 if k == "c" else np.float64
        W = X.astype(wide)
        s = W.sum(axis=0)
        mag = np.abs(W).sum(axis=0)
        eps = eps_of(dt)
        bound = 2.0 * (P + 1) * eps * mag + tiny_of(dt)
        if opn == "avg":
            s = s / P
            bound = bound / P + 2 * eps * np.abs(s) + tiny_of(dt)
        return s, bound


# --------------------------------------------------------------------------- array backends

BACKEND = "numpy"


class DLPackOnly:
    """A numpy array seen only through DLPack (no buffer protocol, no __array__): what a
    framework's host array looks like to lpmpi.  recvbuf=None returns numpy for it."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)

    def get(self):
        return self._a.copy()


def torch_of(a):
    """A torch CPU tensor holding a copy of numpy array a (bfloat16 through its bits)."""
    import torch
    if BF16 is not None and a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def numpy_of_torch(t):
    import torch
    t = t.detach().cpu()          # a CPU tensor's .cpu() is itself (no copy)
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16)
    return t.numpy()


def is_torch(buf):
    return type(buf).__module__.startswith("torch")


def backend_types():
    """Classes of the current backend's arrays (what recvbuf=None must return)."""
    if BACKEND in ("torch", "torch-cuda"):
        import torch
        return (torch.Tensor,)
    if BACKEND == "fakedev":
        from lpmpi._devarray import HostDeviceArray
        return (HostDeviceArray,)
    if BACKEND == "cupy":
        import cupy
        return (cupy.ndarray,)
    return (np.ndarray,)


def is_device(buf):
    if BACKEND == "torch-cuda":
        return is_torch(buf) and buf.is_cuda
    return (BACKEND in ("fakedev", "cupy") and buf is not None
            and hasattr(buf, "__cuda_array_interface__"))


def to_backend(a):
    """A numpy array as an array of the current backend (a copy)."""
    if BACKEND == "torch":
        return torch_of(a)
    if BACKEND == "torch-cuda":
        return torch_of(a).cuda()
    if BACKEND == "dlpack":
        return DLPackOnly(a.copy())
    if BACKEND == "fakedev":
        from lpmpi._devarray import HostDeviceArray
        return HostDeviceArray(a.copy())
    if BACKEND == "cupy":
        import cupy
        return cupy.array(a)
    return a


def to_host(buf):
    """Host numpy copy of a device array of the current backend."""
    if is_torch(buf):
        return numpy_of_torch(buf).copy()
    if hasattr(buf, "get"):
        return np.asarray(buf.get())
    raise TypeError(f"cannot copy {type(buf).__name__} to the host")


def flat(buf):
    """Flat numpy view of any buffer (numpy array or buffer-protocol object)."""
    if isinstance(buf, np.ndarray):
        return buf.reshape(-1)
    if is_torch(buf):
        return numpy_of_torch(buf).reshape(-1)
    if is_device(buf) or isinstance(buf, DLPackOnly):
        return to_host(buf).reshape(-1)
    return np.asarray(memoryview(buf)).reshape(-1)


def snapshot(buf):
    if buf is None or buf is MPI.IN_PLACE:
        return None
    if isinstance(buf, np.ndarray):
        return buf.tobytes()
    if is_torch(buf) or is_device(buf) or isinstance(buf, DLPackOnly):
        return flat(buf).tobytes()
    try:
        return memoryview(buf).tobytes()
    except TypeError:
        return repr(buf)


def describe_diff(got, exp, bound=None, limit=4, bitwise=False):
    """None when got matches exp (exactly, or within bound), else a description."""
    got = flat(got)
    exp = np.asarray(exp).reshape(-1)
    if got.size != exp.size:
        return f"size {got.size} != expected {exp.size}"
    if bound is None:
        if not bitwise and (got.dtype.kind in "fc" or (BF16 is not None and got.dtype == BF16)):
            g64 = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
            e64 = exp.astype(g64.dtype)
            bad = ~((g64 == e64) | (np.isnan(g64) & np.isnan(e64)))
        else:
            n = got.dtype.itemsize
            if exp.dtype != got.dtype:
                return f"dtype {got.dtype} != expected {exp.dtype}"
            bad = (got.view(np.uint8).reshape(got.size, n) !=
                   exp.view(np.uint8).reshape(exp.size, n)).any(axis=1)
    else:
        w = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        diff = np.abs(w - exp)
        bad = ~(diff <= bound)
    idx = np.flatnonzero(bad)
    if idx.size == 0:
        return None
    items = ", ".join(f"[{i}] got {got[i]!r} expected {exp[i]!r}" for i in idx[:limit])
    return f"{idx.size}/{got.size} elements wrong: {items}"


def digest(buf):
    b = flat(buf).tobytes() if buf is not None else b""
    return hashlib.blake2b(b, digest_size=10).hexdigest()


# --------------------------------------------------------------------------- buffers

ARRAY_TYPECODES = "bBhHiIlLqQfd"


def make_buf(kind_, data, shape):
    """Buffer of kind `kind_` holding 1-D numpy `data` (copy)."""
    if kind_ == "numpy":
        return to_backend(data.reshape(shape).copy())
    if kind_ == "bytearray":
        assert data.dtype == np.uint8
        return bytearray(data.tobytes())
    if kind_ == "bytes":
        assert data.dtype == np.uint8
        return bytes(data.tobytes())
    if kind_ == "memoryview":
        return memoryview(data.reshape(shape).copy())
    if kind_.startswith("array:"):
        tc = kind_[6:]
        assert np.dtype(tc) == data.dtype, (tc, data.dtype)
        a = array.array(tc)
        a.frombytes(data.tobytes())
        return a
    raise ValueError(kind_)


def sentinel_like(kind_, dt, count, shape):
    data = np.full(count * dt.itemsize, 0x5A, np.uint8).view(dt)
    if kind_ == "bytes":
        kind_ = "bytearray"
    return make_buf(kind_, data, shape)


def buf_shape(buf):
    if isinstance(buf, (np.ndarray, DLPackOnly)) or is_device(buf) or is_torch(buf):
        return tuple(buf.shape)
    return np.asarray(memoryview(buf)).shape


def buf_dtype(buf):
    if is_torch(buf):
        return flat(buf).dtype
    if isinstance(buf, np.ndarray) or is_device(buf) or isinstance(buf, DLPackOnly):
        return buf.dtype
    return np.asarray(memoryview(buf)).dtype


def kwargs_for(c):
    kw = {}
    if c.get("alg", "auto") != "auto" or c.get("explicit_auto"):
        kw["algorithm"] = c.get("alg", "auto")
    if c.get("chunk") is not None:
        kw["chunk_bytes"] = c["chunk"]
    return kw


class CaseFailure(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise CaseFailure(msg)


# --------------------------------------------------------------------------- case runners
# A runner executes one case on `comm` (every rank of comm calls it) and returns
# (group, digest) for the cross-rank identity check, or None.

def case_seed(c):
    if c.get("seed") is not None:
        return int(c["seed"])
    key = json.dumps({k: v for k, v in c.items() if k not in ("seed",)}, sort_keys=True)
    return zlib.crc32(key.encode())


def run_reduction(c, comm, group=0, seed_extra=0):
    """allreduce / reduce case.  Keys: coll alg dtype op spell shape rshape chunk mode buf
    rbuf root."""
    coll = c["coll"]
    P, r = comm.Get_size(), comm.Get_rank()
    dt = get_dtype(c["dtype"])
    opn = c["op"]
    shape = tuple(c.get("shape", ()))
    count = int(np.prod(shape, dtype=np.int64))
    root = c.get("root", 0) % P if coll == "reduce" else None
    is_root = coll == "allreduce" or r == root
    seed = case_seed(c) + seed_extra
    inputs = [make_input(seed, q, dt, opn, count) for q in range(P)]
    exp, bound = reference(inputs, opn, dt)
    skind = c.get("buf", "numpy")
    rkind = c.get("rbuf") or ("bytearray" if skind == "bytes" else skind)
    rshape = tuple(c["rshape"]) if c.get("rshape") is not None else shape
    mode = c.get("mode", "new")
    op = op_object(opn, c.get("spell", 0))
    kw = kwargs_for(c)
    if c.get("comm_none"):
        assert comm is WORLD
    else:
        kw["comm"] = comm
    if coll == "reduce":
        kw["root"] = root

    x = make_buf(skind, inputs[r], shape)
    y = None
    if mode == "out" or (mode == "out_root" and is_root):
        y = sentinel_like(rkind, dt, count, rshape)
    if mode == "inplace" or (mode == "mixed" and is_root):
        send, recv = MPI.IN_PLACE, x
    elif mode == "same":
        send, recv = x, x
    else:
        send, recv = x, y
    in_place = send is MPI.IN_PLACE or send is recv
    x_before, y_before = snapshot(x), snapshot(y)
    fn = lpmpi.allreduce if coll == "allreduce" else lpmpi.reduce
    res = fn(send, recv, op, **kw)

    if not is_root:
        check(res is None, f"non-root rank returned {type(res).__name__}, expected None")
        check(snapshot(x) == x_before, "non-root input buffer was written")
        if y is not None:
            check(snapshot(y) == y_before, "non-root recvbuf was written")
        return None
    if recv is None:
        check(isinstance(res, backend_types()),
              f"returned {type(res).__name__}, expected {backend_types()[0].__name__}")
        check(tuple(res.shape) == buf_shape(x), f"returned shape {res.shape}, expected {buf_shape(x)}")
        check(buf_dtype(res) == dt, f"returned dtype {res.dtype}, expected {dt}")
        if is_torch(x):
            check(res.dtype == x.dtype and res.device == x.device,
                  f"returned a {res.dtype} tensor on {res.device}, expected {x.dtype} on {x.device}")
        out = res
    else:
        check(res is recv, f"returned {type(res).__name__} object that is not recvbuf")
        out = recv
    if not in_place:
        check(snapshot(x) == x_before, "sendbuf was modified")
    d = describe_diff(out, exp, bound)
    check(d is None, f"wrong result: {d}")
    if coll == "allreduce":
        return (group, digest(out))
    return None


def run_bcast(c, comm, group=0, seed_extra=0):
    P, r = comm.Get_size(), comm.Get_rank()
    dt = get_dtype(c["dtype"])
    shape = tuple(c.get("shape", ()))
    count = int(np.prod(shape, dtype=np.int64))
    root = c.get("root", 0) % P
    seed = case_seed(c) + seed_extra
    data = make_input(seed, root, dt, None, count)
    skind = c.get("buf", "numpy")
    if r == root:
        buf = make_buf(skind, data, shape)
    else:  # different garbage on every non-root rank
        buf = make_buf(skind, make_input(seed + 1, r, dt, None, count), shape)
    kw = kwargs_for(c)
    if not c.get("comm_none"):
        kw["comm"] = comm
    if c.get("root_kw", True):
        res = lpmpi.bcast(buf, root=root, **kw)
    else:
        res = lpmpi.bcast(buf, root, **kw)
    check(res is buf, f"returned {type(res).__name__} object that is not buf")
    if snapshot(buf) != data.tobytes():
        raise CaseFailure(f"wrong result: {describe_diff(buf, data, bitwise=True)}")
    return (group, digest(buf))


def run_case_dict(c, comm, group=0, seed_extra=0):
    if c["coll"] == "bcast":
        return run_bcast(c, comm, group, seed_extra)
    return run_reduction(c, comm, group, seed_extra)


def describe(c):
    parts = [c["coll"]]
    for k in ("alg", "dtype", "op", "spell", "shape", "rshape", "chunk", "mode", "buf", "rbuf",
              "root", "comm", "seed", "tag", "comm_none", "explicit_auto", "root_kw"):
        if k == "root" and c["coll"] == "allreduce":
            continue
        if k in c and c[k] is not None:
            v = c[k]
            if isinstance(v, list):
                v = tuple(v)
            parts.append(f"{k}={v}".replace(" ", ""))
    return " ".join(parts)


# --------------------------------------------------------------------------- harness

class Watchdog:
    """Reports the running case and ends the process if a case hangs."""

    def __init__(self, timeout, total):
        self.timeout = timeout
        self.case = None
        self.deadline = None
        self.lock = threading.Lock()
        t = threading.Thread(target=self._loop, daemon=True)
        t.start()
        # backstop in case a hang never releases the GIL: whole-run limit, dumps and exits
        faulthandler.dump_traceback_later(total, exit=True)

    def arm(self, case):
        with self.lock:
            self.case = case
            self.deadline = time.monotonic() + self.timeout

    def disarm(self):
        with self.lock:
            self.deadline = None

    def _loop(self):
        while True:
            time.sleep(0.25)
            with self.lock:
                late = self.deadline is not None and time.monotonic() > self.deadline
                case = self.case
            if late:
                say(f"FAIL rank={RANK} case={case}: timeout after {self.timeout}s "
                    "(hang or deadlock; other ranks may have failed first)")
                faulthandler.dump_traceback(all_threads=True)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(3)


class Harness:
    def __init__(self, args):
        self.args = args
        self.filter = re.compile(args.filter) if args.filter else None
        self.stride = max(1, args.stride)
        self.ncases = 0
        self.nfailed = 0
        self.printed = 0
        self.seen = set()
        self.wd = Watchdog(args.timeout, args.total_timeout)
        self.digests = []

    def selected(self, desc):
        if self.filter is not None and not self.filter.search(desc):
            return False
        return self.stride <= 1 or zlib.crc32(desc.encode()) % self.stride == 0

    def fail(self, desc, msg):
        self.nfailed += 1
        if self.printed < self.args.max_print:
            self.printed += 1
            say(f"FAIL rank={RANK} case={desc}: {msg}")
        elif self.printed == self.args.max_print:
            self.printed += 1
            say(f"FAIL rank={RANK}: (further failures on this rank not printed)")

    def run(self, desc, fn, force=False):
        """Run fn() on every rank.  fn returns None or (group, digest)."""
        if not force and not self.selected(desc):
            return
        if desc in self.seen:  # identical description twice: a bug in the matrix
            desc = f"{desc} #{self.ncases}"
        self.seen.add(desc)
        self.ncases += 1
        if self.args.list:
            if RANK == 0:
                print(desc)
            return
        if self.args.verbose and RANK == 0:
            say(f"CASE {desc}")
        ok, msg, out = True, None, None
        self.wd.arm(desc)
        try:
            out = fn()
        except CaseFailure as e:
            ok, msg = False, str(e)
        except Exception as e:
            ok = False
            tb = traceback.format_exc(limit=-4) if self.printed < 5 else ""
            msg = f"{type(e).__name__}: {e}" + (f"\n{tb}" if tb else "")
        finally:
            self.wd.disarm()
        allres = WORLD.allgather((ok, out))
        if ok and out is not None:
            group, dig = out
            peers = [(q, o[1]) for q, (k, o) in enumerate(allres)
                     if k and o is not None and o[0] == group]
            if len({d for _, d in peers}) > 1:
                ok = False
                msg = "result not bitwise identical across ranks: " + \
                    ", ".join(f"world rank {q}: {d}" for q, d in peers)
            elif self.args.digests and peers and peers[0][0] == RANK:
                self.digests.append((desc, group, dig))
        if not ok:
            self.fail(desc, msg)

    def finish(self, suite, t0):
        failed = WORLD.allreduce(self.nfailed)
        ncases = self.ncases
        if self.args.digests:
            alld = WORLD.gather(self.digests, root=0)
            if RANK == 0:
                for lst in alld:
                    for desc, group, dig in lst:
                        print(f"DIGEST {desc} group={group} {dig}")
        if RANK == 0:
            print(f"SUMMARY suite={suite} P={SIZE} cases={ncases} failures={failed} "
                  f"time={time.time() - t0:.1f}s", flush=True)
        sys.stdout.flush()
        return 1 if failed else 0


# --------------------------------------------------------------------------- matrices

def small_sizes():
    s = [0, 1, 2, 7, 13, 31, 100]
    if SIZE <= 2:
        s += [1000, 4099]
    return s


def chunks_for(count):
    if count >= 1000:
        return [None, 24, 777, 8192]
    return [None, 4, 12, 24, 100, 4096]


def shape_for(count, i):
    """1-D most of the time; multi-dim for counts that factor."""
    if count == 100 and i % 2:
        return [10, 10]
    if count == 1000 and i % 2:
        return [10, 4, 25]
    if count == 0 and i % 3 == 1:
        return [0, 3]
    return [count]


class Rot:
    """Deterministic rotation through a list."""

    def __init__(self, items, step=1, start=0):
        self.items, self.step, self.i = list(items), step, start

    def __call__(self):
        v = self.items[self.i % len(self.items)]
        self.i += self.step
        return v


ROT_DTYPES = ["float64", "int32", "float32", "uint8", "complex128", "int64", "float16", "int8",
              "complex64", "uint64", "bool", "int16", "uint16", "uint32"]


def rot_dtypes():
    return ROT_DTYPES + (["bfloat16"] if BF16 is not None else [])


def reduction_matrix(coll):
    """The cases for allreduce / reduce on COMM_WORLD."""
    cases = []
    sizes = small_sizes()
    modes = MODES[coll]
    spell = Rot([0, 1, 2])
    roots = Rot(range(SIZE), step=1)
    # A: every algorithm x dtype x valid op
    size_r, chunk_r, mode_r = Rot(sizes, 1, 3), Rot([None, 4, 12, 24, 100], 1), Rot(modes, 1, 1)
    for alg in algs_for(coll):
        for dtn in DTYPE_NAMES:
            for opn in valid_ops(dtn):
                count = size_r()
                chunk = chunk_r()
                if count >= 1000 and chunk is not None and chunk < 24:
                    chunk = 24
                cases.append(dict(coll=coll, alg=alg, dtype=dtn, op=opn, spell=spell(),
                                  shape=shape_for(count, len(cases)), chunk=chunk, mode=mode_r(),
                                  root=roots()))
    # B: every algorithm x size x chunk x mode (rotating dtype / op)
    dt_r = Rot(rot_dtypes(), 1)
    op_i = Rot(range(11), 1)
    for alg in algs_for(coll):
        for count in sizes:
            for chunk in chunks_for(count):
                for mode in modes:
                    dtn = dt_r()
                    ops = valid_ops(dtn)
                    opn = ops[op_i() % len(ops)]
                    cases.append(dict(coll=coll, alg=alg, dtype=dtn, op=opn, spell=spell(),
                                      shape=shape_for(count, len(cases)), chunk=chunk, mode=mode,
                                      root=roots()))
    # C: shapes (recvbuf shape may differ from sendbuf shape when counts agree)
    shapes = [([], None), ([0], None), ([0, 3], None), ([3, 0, 2], None), ([1], None),
              ([3, 4], None), ([2, 3, 5], None), ([4, 1, 1, 3], None), ([3, 4], [12]),
              ([12], [2, 6]), ([2, 3, 5], [5, 6])]
    for alg in algs_for(coll):
        for shp, rshp in shapes:
            for mode in modes:
                if rshp is not None and mode not in ("out", "out_root"):
                    continue
                dtn = ["float64", "int32", "float32", "complex64"][len(cases) % 4]
                cases.append(dict(coll=coll, alg=alg, dtype=dtn, op="sum", shape=shp,
                                  rshape=rshp, chunk=[None, 8][len(cases) % 2], mode=mode,
                                  root=roots()))
    # D: buffer-protocol objects that are not numpy arrays
    bufs = [("bytearray", "uint8", "bxor", None), ("bytearray", "uint8", "sum", None),
            ("bytearray", "uint8", "max", "numpy"), ("bytes", "uint8", "bor", None),
            ("bytes", "uint8", "sum", "numpy"), ("array:d", "float64", "sum", None),
            ("array:f", "float32", "max", None), ("array:i", "int32", "sum", None),
            ("array:q", "int64", "bor", None), ("array:B", "uint8", "band", None),
            ("array:h", "int16", "min", None), ("array:b", "int8", "prod", None),
            ("array:Q", "uint64", "sum", None), ("array:d", "float64", "avg", "numpy"),
            ("memoryview", "float32", "sum", None), ("memoryview", "int64", "max", None),
            ("numpy", "uint8", "sum", "bytearray"), ("numpy", "float64", "sum", "array:d")]
    cnt_r = Rot([0, 5, 37, 100])
    for alg in algs_for(coll):
        for bk, dtn, opn, rk in bufs:
            for mode in modes:
                if bk == "bytes" and mode not in ("new", "out", "out_root"):
                    continue
                if rk is not None and mode not in ("out", "out_root"):
                    continue
                cases.append(dict(coll=coll, alg=alg, dtype=dtn, op=opn, shape=[cnt_r()],
                                  chunk=[None, 12][len(cases) % 2], mode=mode, buf=bk, rbuf=rk,
                                  root=roots()))
    # E (reduce): every root x algorithm x mode
    if coll == "reduce":
        cnt_r = Rot([7, 100, 13, 1, 31])
        for alg in algs_for(coll):
            for root in range(SIZE):
                for mode in modes:
                    dtn = dt_r()
                    ops = valid_ops(dtn)
                    cases.append(dict(coll=coll, alg=alg, dtype=dtn, op=ops[op_i() % len(ops)],
                                      shape=[cnt_r()], chunk=chunk_r(), mode=mode, root=root,
                                      tag="roots"))
    # F: comm=None (COMM_WORLD by default) and explicit algorithm="auto"
    for alg in algs_for(coll):
        cases.append(dict(coll=coll, alg=alg, dtype="float64", op="sum", shape=[31], chunk=None,
                          mode=modes[0], comm_none=True, root=0))
    cases.append(dict(coll=coll, alg="auto", explicit_auto=True, dtype="int32", op="sum",
                      shape=[33], chunk=None, mode="out", root=SIZE - 1))
    return cases


def bcast_matrix():
    cases = []
    sizes = small_sizes()
    roots = Rot(range(SIZE))
    chunk_r = Rot([None, 4, 12, 24, 100, 3])
    size_r = Rot(sizes, 1, 2)
    for alg in algs_for("bcast"):
        for dtn in DTYPE_NAMES:
            for _ in range(2):
                count = size_r()
                chunk = chunk_r()
                if count >= 1000 and chunk is not None and chunk < 24:
                    chunk = 24
                cases.append(dict(coll="bcast", alg=alg, dtype=dtn,
                                  shape=shape_for(count, len(cases)), chunk=chunk, root=roots()))
    dt_r = Rot(rot_dtypes())
    for alg in algs_for("bcast"):
        for count in sizes:
            for chunk in chunks_for(count):
                cases.append(dict(coll="bcast", alg=alg, dtype=dt_r(), shape=[count],
                                  chunk=chunk, root=roots()))
        for root in range(SIZE):
            for count in (1, 31, 100) + ((4099,) if SIZE <= 2 else ()):
                cases.append(dict(coll="bcast", alg=alg, dtype=dt_r(), shape=[count],
                                  chunk=[None, 8, 100][count % 3], root=root, root_kw=False))
        for shp in ([], [0, 3], [3, 4], [2, 3, 5]):
            cases.append(dict(coll="bcast", alg=alg, dtype=dt_r(), shape=shp, chunk=8,
                              root=roots()))
        for bk, dtn in (("bytearray", "uint8"), ("array:d", "float64"), ("array:i", "int32"),
                        ("array:b", "int8"), ("memoryview", "complex64"),
                        ("memoryview", "uint16")):
            for count in (0, 9, 100):
                cases.append(dict(coll="bcast", alg=alg, dtype=dtn, shape=[count], buf=bk,
                                  chunk=[None, 4][count % 2], root=roots()))
        cases.append(dict(coll="bcast", alg=alg, dtype="float32", shape=[31], comm_none=True,
                          root=0))
    return cases


def backend_supports(c):
    """A backend other than numpy runs the cases whose buffers are numpy arrays."""
    if BACKEND == "numpy":
        return True
    if c.get("buf", "numpy") != "numpy" or c.get("rbuf") not in (None, "numpy"):
        return False
    # CuPy has no bfloat16; numpy's own __dlpack__ does not export ml_dtypes' bfloat16
    # (torch-cuda has it: DLPack's bfloat16)
    return not (BACKEND in ("cupy", "dlpack") and c.get("dtype") == "bfloat16")


def suite_matrix(h, coll):
    cases = bcast_matrix() if coll == "bcast" else reduction_matrix(coll)
    for c in cases:
        if backend_supports(c):
            h.run(describe(c), lambda c=c: run_case_dict(c, WORLD))


# --------------------------------------------------------------------------- comms suite

def comm_variants():
    """(name, comm or None for COMM_NULL on this rank, group key, free?) built collectively."""
    out = [("self", MPI.COMM_SELF, RANK, False), ("world", WORLD, 0, False)]
    out.append(("dup", WORLD.Dup(), 0, True))
    half = (SIZE + 1) // 2
    c = int(RANK >= half)
    out.append(("split_halves", WORLD.Split(c, RANK), c, True))
    c = RANK % 2
    out.append(("split_oddeven_revkey", WORLD.Split(c, SIZE - RANK), c, True))
    out.append(("split_single", WORLD.Split(RANK, 0), RANK, True))
    out.append(("split_reversed", WORLD.Split(0, SIZE - 1 - RANK), 0, True))
    grp = WORLD.Get_group()
    sub = grp.Incl(list(range(0, SIZE, 2)))
    cc = WORLD.Create(sub)
    sub.Free()
    grp.Free()
    out.append(("create_even", cc if cc != MPI.COMM_NULL else None, 0, cc != MPI.COMM_NULL))
    return out


def suite_comms(h):
    variants = comm_variants()
    base = []
    for coll in ("allreduce", "reduce", "bcast"):
        for alg in algs_for(coll):
            for i, (dtn, opn, count, chunk) in enumerate(
                    [("float64", "sum", 13, None), ("int32", "max", 100, 12),
                     ("float32", "avg", 7, 4), ("uint8", "bxor", 0, None),
                     ("complex128", "prod", 31, 24), ("bool", "lor", 1, 8)]):
                if coll == "bcast":
                    opn = None
                modes = MODES[coll]
                base.append(dict(coll=coll, alg=alg, dtype=dtn, op=opn, shape=[count],
                                 chunk=chunk, mode=modes[i % len(modes)], root=i + 1))
    for name, comm, group, _ in variants:
        for c in base:
            c = dict(c, comm=name)

            def fn(c=c, comm=comm, group=group):
                if comm is None:
                    return None
                # different data in each group (seed_extra) but same for members of a group
                return run_case_dict(c, comm, group=group, seed_extra=17 * group)
            h.run(describe(c), fn)

    # messages of the user on the same communicator never match lpmpi's
    for name, comm, group, _ in variants:
        for coll in ("allreduce", "reduce", "bcast"):
            for alg in algs_for(coll):
                desc = f"isolation coll={coll} alg={alg} comm={name}"

                def fn(coll=coll, alg=alg, comm=comm):
                    if comm is None:
                        return
                    P, r = comm.Get_size(), comm.Get_rank()
                    inbox = np.full(4, -1, np.int64)
                    req = comm.Irecv([inbox, MPI.INT64_T], source=MPI.ANY_SOURCE,
                                     tag=MPI.ANY_TAG)
                    x = np.arange(50, dtype=np.float64) + r
                    err = None
                    try:
                        if coll == "allreduce":
                            y = lpmpi.allreduce(x, comm=comm, algorithm=alg, chunk_bytes=16)
                            exp = np.arange(50) * P + P * (P - 1) / 2
                            check(np.array_equal(y, exp), "wrong allreduce result")
                        elif coll == "reduce":
                            y = lpmpi.reduce(x, op="max", root=P - 1, comm=comm, algorithm=alg,
                                             chunk_bytes=16)
                            if r == P - 1:
                                check(np.array_equal(y, np.arange(50) + P - 1), "wrong reduce")
                        else:
                            lpmpi.bcast(x, root=0, comm=comm, algorithm=alg, chunk_bytes=16)
                            check(np.array_equal(x, np.arange(50.0)), "wrong bcast result")
                    except Exception as e:
                        err = e
                    try:
                        matched = req.Test()
                    except Exception as e:
                        matched = f"{type(e).__name__}: {e}"
                    comm.Barrier()  # nobody sends the user message before all have tested
                    msg = np.array([r, 7, 7, 7], np.int64)
                    comm.Send([msg, MPI.INT64_T], dest=(r + 1) % P, tag=5)
                    if matched is False:
                        req.Wait()
                    if err is not None:
                        raise err
                    check(matched is False, "a user Irecv(ANY_SOURCE, ANY_TAG) pending on the "
                          f"communicator matched a message of lpmpi ({matched}, {inbox})")
                    check(inbox[0] == (r - 1) % P and inbox[1] == 7,
                          f"user message corrupted: {inbox}")
                    return
                h.run(desc, fn)

    # many communicators created, used and freed (per-communicator cache cleanup)
    def churn():
        rng = np.random.default_rng(3)
        for i in range(30):
            c = WORLD.Dup() if i % 2 else WORLD.Split(RANK % 2, RANK)
            x = rng.uniform(-1, 1, 20)
            alg = ["lp", "mst", "be", "ring", "native"][i % 5]
            y = lpmpi.allreduce(x, op="max", comm=c, algorithm=alg, chunk_bytes=8)
            ys = c.allgather(y.tobytes())
            check(len(set(ys)) == 1, "results differ across ranks")
            c.Free()
    h.run("churn dup/split/free x30 allreduce", churn)

    # interleaving collectives on two overlapping communicators
    def interleave():
        d = WORLD.Dup()
        try:
            for i in range(6):
                comm = d if i % 2 else WORLD
                x = np.full(9, RANK + i, np.int64)
                y = lpmpi.allreduce(x, comm=comm, algorithm=algs_for("allreduce")[i % 5],
                                    chunk_bytes=8)
                check((y == SIZE * i + SIZE * (SIZE - 1) // 2).all(), f"wrong at step {i}")
        finally:
            d.Free()
    h.run("interleave world/dup allreduce", interleave)

    for name, comm, group, free in variants:
        if free and comm is not None:
            comm.Free()


# --------------------------------------------------------------------------- errors suite

NAME_RE = {}


def names_argument(msg, names):
    for n in names:
        rx = NAME_RE.setdefault(n, re.compile(r"(?<![A-Za-z0-9])" + re.escape(n) +
                                              r"(?![A-Za-z0-9])"))
        if rx.search(msg):
            return True
    return False


def expect_error(desc, call, bufs, names, types=(TypeError, ValueError), mismatch=False):
    """Run call(); it must raise one of `types` whose message names one of `names`, and
    leave every buffer in `bufs` unchanged."""
    snaps = [snapshot(b) for b in bufs]
    try:
        call()
    except Exception as e:
        if not isinstance(e, types):
            raise CaseFailure(f"raised {type(e).__name__}: {e}; expected "
                              f"{'/'.join(t.__name__ for t in types)}")
        if not mismatch and isinstance(e, lpmpi.MismatchError):
            raise CaseFailure(f"raised MismatchError for a local argument error: {e}")
        if mismatch and not isinstance(e, lpmpi.MismatchError):
            raise CaseFailure(f"raised {type(e).__name__}: {e}; expected MismatchError")
        if names and not names_argument(str(e), names):
            raise CaseFailure(f"message {str(e)!r} ({type(e).__name__}) names none of "
                              f"{names}")
    else:
        if mismatch:
            raise CaseFailure("no exception; expected MismatchError")
        raise CaseFailure(f"no exception; expected {'/'.join(t.__name__ for t in types)} "
                          f"naming {names}")
    for i, (b, s) in enumerate(zip(bufs, snaps)):
        check(snapshot(b) == s, f"buffer #{i} ({type(b).__name__}) modified by a failed call")


def ro(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def bad_buffers():
    """(label, object) for things that are not valid buffers for a collective."""
    out = [("None", None), ("int", 3), ("str", "abc"), ("list", [1.0, 2.0]), ("object", object()),
           ("objarray", np.array([1, "a", None], dtype=object)),
           ("strarray", np.array(["ab", "cd"])),
           ("datetime64", np.zeros(4, "datetime64[s]")),
           ("structured", np.zeros(4, dtype=[("a", "i4"), ("b", "f8")])),
           ("noncontig", np.zeros(20)[::2]),
           ("fortran2d", np.asfortranarray(np.zeros((3, 4))))]
    if np.dtype(np.longdouble).itemsize > 8:
        out.append(("longdouble", np.zeros(4, np.longdouble)))
    return out


def intercomm():
    """An intercommunicator between two halves of WORLD (SIZE >= 2), built collectively."""
    half = SIZE // 2
    color = int(RANK >= half)
    local = WORLD.Split(color, RANK)
    remote_leader = half if color == 0 else 0
    inter = local.Create_intercomm(0, WORLD, remote_leader, tag=99)
    return local, inter


def suite_errors(h, check_env=False):
    P = SIZE
    rng = np.random.default_rng(RANK)
    inter = local = None
    if P >= 2:
        local, inter = intercomm()
    comms_bad = [("str", "world"), ("int", 42), ("group", WORLD.Get_group()),
                 ("COMM_NULL", MPI.COMM_NULL)]
    if inter is not None:
        comms_bad.append(("intercomm", inter))

    for coll in ("allreduce", "reduce", "bcast"):
        if coll == "bcast":
            fn = lambda *a, **k: lpmpi.bcast(*a, **k)
        elif coll == "allreduce":
            fn = lambda *a, **k: lpmpi.allreduce(*a, **k)
        else:
            fn = lambda *a, **k: lpmpi.reduce(*a, **k)

        def fresh(n=10, dt=np.float64):
            return rng.uniform(-1, 1, n).astype(dt)

        def E(desc, call, bufs, names, types=(TypeError, ValueError)):
            h.run(f"errors {coll} {desc}",
                  lambda: expect_error(desc, call, bufs, names, types))

        if coll == "bcast":
            for label, b in bad_buffers():
                E(f"buf={label}", lambda b=b: fn(b), [b], ("buf",))
            E("buf=IN_PLACE", lambda: fn(MPI.IN_PLACE), [], ("buf",))
            x = ro(fresh())
            E("buf=readonly", lambda x=x: fn(x), [x], ("buf",))
            b = bytes(10)
            E("buf=bytes", lambda b=b: fn(b), [b], ("buf",))
            for alg in algs_for("bcast"):
                x = ro(fresh())
                for root in {0, P - 1}:
                    E(f"buf=readonly alg={alg} root={root}",
                      lambda x=x, alg=alg, root=root: fn(x, root=root, algorithm=alg), [x],
                      ("buf",))
        else:
            # sendbuf
            for label, b in bad_buffers():
                y = np.zeros(10)
                E(f"sendbuf={label}", lambda b=b, y=y: fn(b, y), [y], ("sendbuf", "dtype"))
                E(f"sendbuf={label} recvbuf=None", lambda b=b: fn(b), [], ("sendbuf", "dtype"))
            # recvbuf
            x = fresh()
            bad_recv = [("dtype_float32", np.zeros(10, np.float32), ("recvbuf", "sendbuf", "dtype")),
                        ("dtype_int64", np.zeros(10, np.int64), ("recvbuf", "sendbuf", "dtype")),
                        ("count11", np.zeros(11), ("recvbuf", "sendbuf")),
                        ("count9", np.zeros(9), ("recvbuf", "sendbuf")),
                        ("count0", np.zeros(0), ("recvbuf", "sendbuf")),
                        ("readonly", ro(np.zeros(10)), ("recvbuf",)),
                        ("noncontig", np.zeros(20)[::2], ("recvbuf",)),
                        ("list", [0.0] * 10, ("recvbuf",)),
                        ("int", 5, ("recvbuf",)),
                        ("objarray", np.zeros(10, dtype=object), ("recvbuf", "dtype")),
                        ("array.array_f", array.array("f", bytes(40)),
                         ("recvbuf", "sendbuf", "dtype"))]
            for label, y, names in bad_recv:
                for root in ([0, P - 1] if coll == "reduce" else [0]):
                    E(f"recvbuf={label} root={root}",
                      lambda y=y, root=root: (fn(x, y, root=root) if coll == "reduce"
                                              else fn(x, y)),
                      [x, y], names)
            xb = bytes(10)
            E("recvbuf=bytes(readonly)", lambda: fn(np.zeros(10, np.uint8), xb), [xb],
              ("recvbuf",))
            if coll == "allreduce" or P == 1:
                # (reduce: only checkable where every rank is root)
                E("IN_PLACE recvbuf=readonly", lambda: fn(MPI.IN_PLACE, ro(x)), [x],
                  ("recvbuf", "sendbuf"))
                xr = ro(fresh())
                E("sendbuf is recvbuf readonly", lambda xr=xr: fn(xr, xr), [xr],
                  ("recvbuf", "sendbuf"))
                nc = np.zeros(20)
                E("IN_PLACE recvbuf=noncontig", lambda nc=nc: fn(MPI.IN_PLACE, nc[::2]), [nc],
                  ("recvbuf", "sendbuf"))
            E("IN_PLACE recvbuf=None", lambda: fn(MPI.IN_PLACE), [], ("recvbuf", "sendbuf"))
            E("IN_PLACE recvbuf=None explicit", lambda: fn(MPI.IN_PLACE, None), [],
              ("recvbuf", "sendbuf"))
            # ops
            for label, op in [("str_foo", "foo"), ("str_empty", ""), ("int", 3),
                              ("MPI.REPLACE", MPI.REPLACE), ("MPI.MAXLOC", MPI.MAXLOC),
                              ("MPI.NO_OP", MPI.NO_OP), ("MPI.OP_NULL", MPI.OP_NULL),
                              ("object", object())]:
                y = np.zeros(10)
                E(f"op={label}", lambda op=op, y=y: fn(x, y, op), [x, y], ("op",))
            # op / dtype pairings outside the contract: TypeError
            for dtn in DTYPE_NAMES:
                dt = get_dtype(dtn)
                for opn in OP_NAMES:
                    if opn in valid_ops(dtn):
                        continue
                    for spell in (0, 1, 2):
                        if spell == 1 and opn == "avg":
                            continue
                        a = make_input(1, RANK, dt, None, 6)
                        y = np.zeros(6, dt)
                        op = op_object(opn, spell)
                        E(f"pairing dtype={dtn} op={opn} spell={spell}",
                          lambda a=a, y=y, op=op: fn(a, y, op), [a, y],
                          ("op", "dtype", "sendbuf"), types=(TypeError,))
                        E(f"pairing IN_PLACE dtype={dtn} op={opn} spell={spell}",
                          lambda a=a, op=op: fn(MPI.IN_PLACE, a, op), [a],
                          ("op", "dtype", "sendbuf", "recvbuf"), types=(TypeError,))
        # root
        if coll != "allreduce":
            for root in (-1, P, P + 3, "0", 1.5, None, [0]):
                x = fresh()
                if coll == "bcast":
                    E(f"root={root!r}", lambda root=root, x=x: fn(x, root=root), [x], ("root",))
                else:
                    y = np.zeros(10)
                    E(f"root={root!r}", lambda root=root, x=x, y=y: fn(x, y, root=root),
                      [x, y], ("root",))
        # algorithm
        bad_algs = ["foo", "", "LP?", 3, b"lp"]
        if coll != "allreduce":
            bad_algs.append("ring")
        for alg in bad_algs:
            x = fresh()
            E(f"algorithm={alg!r}", lambda alg=alg, x=x: fn(x, algorithm=alg), [x],
              ("algorithm",))
        # chunk_bytes
        for alg in ("auto", "lp"):
            for cb in (0, -1, -4096, 1.5, "64", 64.0):
                x = fresh()
                E(f"chunk_bytes={cb!r} alg={alg}",
                  lambda cb=cb, alg=alg, x=x: fn(x, algorithm=alg, chunk_bytes=cb), [x],
                  ("chunk_bytes",))
        # comm
        for label, cm in comms_bad:
            x = fresh()
            E(f"comm={label}", lambda cm=cm, x=x: fn(x, comm=cm), [x], ("comm",))

    # afterwards every collective still works on COMM_WORLD (no desynchronization)
    sanity(h, "after errors")
    if inter is not None:
        inter.Free()
        local.Free()


def sanity(h, label):
    for coll in ("allreduce", "reduce", "bcast"):
        for alg in algs_for(coll):
            c = dict(coll=coll, alg=alg, dtype="float64", op=None if coll == "bcast" else "sum",
                     shape=[23], chunk=16, mode=MODES[coll][0], root=SIZE - 1)
            h.run(f"sanity {label} " + describe(c), lambda c=c: run_case_dict(c, WORLD),
                  force=True)


# --------------------------------------------------------------------------- check suite

def suite_check(h):
    """Run with LPMPI_CHECK=1: ranks that disagree all raise MismatchError."""
    P = SIZE
    if os.environ.get("LPMPI_CHECK") != "1":
        h.fail("check suite", "LPMPI_CHECK=1 must be set in the environment")
        return
    # agreeing calls (ops spelled differently on different ranks still agree) work as usual
    for coll in ("allreduce", "reduce", "bcast"):
        for alg in algs_for(coll):
            for i, (dtn, opn, count, chunk) in enumerate(
                    [("float64", "sum", 13, None), ("int32", "bxor", 100, 12),
                     ("float32", "max", 0, 4)]):
                c = dict(coll=coll, alg=alg, dtype=dtn, op=None if coll == "bcast" else opn,
                         spell=(RANK + i) % 3, shape=[count], chunk=chunk,
                         mode=MODES[coll][i % len(MODES[coll])], root=i)
                desc = describe(dict(c, spell="per-rank"))
                c["seed"] = zlib.crc32(desc.encode())  # same inputs whatever the spelling
                h.run("check agree " + desc, lambda c=c: run_case_dict(c, WORLD))
    if P < 2:
        return

    for coll in ("allreduce", "reduce", "bcast"):
        algs = algs_for(coll)
        fn = {"allreduce": lpmpi.allreduce, "reduce": lpmpi.reduce, "bcast": lpmpi.bcast}[coll]

        def call(x, y=None, op="sum", root=0, alg="auto", comm=WORLD, chunk=None):
            kw = dict(comm=comm, algorithm=alg)
            if chunk is not None:
                kw["chunk_bytes"] = chunk
            if coll == "bcast":
                return fn(x, root=root, **kw)
            if coll == "reduce":
                return fn(x, y, op, root=root, **kw)
            return fn(x, y, op, **kw)

        def M(desc, body):
            h.run(f"check mismatch {coll} {desc}", body)

        for ai, alg in enumerate(algs):
            other = algs[(ai + 1) % len(algs)]
            if other == "auto":
                other = algs[0]

            # count: rank 0 has 10 elements, the others 11 (and 0 vs 5)
            for n0, n1 in ((10, 11), (0, 5), (7, 6)):
                def body(n0=n0, n1=n1, alg=alg):
                    n = n0 if RANK == 0 else n1
                    x = np.arange(n, dtype=np.float64)
                    y = np.zeros(n)
                    expect_error("", lambda: call(x, y, alg=alg), [x, y], (), mismatch=True)
                    post_check(coll, alg)
                M(f"count {n0}vs{n1} alg={alg}", body)

            # dtype
            def body(alg=alg):
                dt = np.float32 if RANK == 0 else np.int32
                x = np.ones(12, dt)
                y = np.zeros(12, dt)
                expect_error("", lambda: call(x, y, alg=alg), [x, y], (), mismatch=True)
                post_check(coll, alg)
            M(f"dtype float32vsint32 alg={alg}", body)

            # op
            if coll != "bcast":
                def body(alg=alg):
                    x = np.ones(12)
                    y = np.zeros(12)
                    op = lpmpi.SUM if RANK == 0 else "max"
                    expect_error("", lambda: call(x, y, op=op, alg=alg), [x, y], (),
                                 mismatch=True)
                    post_check(coll, alg)
                M(f"op sumvsmax alg={alg}", body)

            # root
            if coll != "allreduce":
                def body(alg=alg):
                    x = np.ones(12)
                    y = np.zeros(12)
                    root = 0 if RANK == 0 else 1
                    expect_error("", lambda: call(x, y, root=root, alg=alg), [x, y], (),
                                 mismatch=True)
                    post_check(coll, alg)
                M(f"root 0vs1 alg={alg}", body)

            # algorithm
            if alg != "auto":
                def body(alg=alg, other=other):
                    x = np.ones(12)
                    y = np.zeros(12)
                    a = alg if RANK == 0 else other
                    expect_error("", lambda: call(x, y, alg=a, chunk=8), [x, y], (),
                                 mismatch=True)
                    post_check(coll, alg)
                M(f"algorithm {alg}vs{other}", body)

            # a local argument error on one rank only
            bad_rank_choices = (0, P - 1)
            for bad in bad_rank_choices:
                locals_ = [("algorithm", "unknown algorithm", dict(alg="nope"))]
                locals_.append(("chunk_bytes", "chunk_bytes=0", dict(chunk=0)))
                if coll != "allreduce":
                    locals_.append(("root", "root out of range", dict(root=P + 1)))
                if coll != "bcast":
                    locals_.append(("op", "avg on int32", dict(op="avg", dt=np.int32)))
                    locals_.append(("recvbuf", "readonly recvbuf", dict(ro=True)))
                else:
                    locals_.append(("buf", "readonly buf", dict(ro=True)))
                for name, label, spec in locals_:
                    def body(bad=bad, name=name, spec=spec, alg=alg):
                        mine = RANK == bad
                        dt = spec.get("dt", np.float64)  # same dtype everywhere
                        x = np.ones(12, dt)
                        y = np.zeros(12, dt)
                        if mine and spec.get("ro"):
                            if coll == "bcast":
                                x.flags.writeable = False
                            else:
                                y.flags.writeable = False
                        kw = dict(alg=alg)
                        if mine:
                            kw["alg"] = spec.get("alg", alg)
                            if "chunk" in spec:
                                kw["chunk"] = spec["chunk"]
                            if "root" in spec:
                                kw["root"] = spec["root"]
                            if "op" in spec:
                                kw["op"] = spec["op"]
                        if mine:
                            expect_error("", lambda: call(x, y, **kw), [x, y], (name,))
                        else:
                            expect_error("", lambda: call(x, y, **kw), [x, y], (),
                                         mismatch=True)
                        post_check(coll, alg)
                    M(f"local error on rank {bad} only: {label} alg={alg}", body)

        # acc_dtype (issue 37: part of the call and of its decision's key): rank 0 carries
        # float16 data in float32, the others reduce float32 data plainly: the engine runs float32
        # on every rank, so only the accumulation differs, and every rank names it
        if coll != "bcast":
            def body():
                if RANK == 0:
                    x, y = np.ones(12, np.float16), np.zeros(12, np.float16)
                    kw = dict(acc_dtype="float32")
                else:
                    x, y = np.ones(12, np.float32), np.zeros(12, np.float32)
                    kw = {}
                fn_ = {"allreduce": lpmpi.allreduce, "reduce": lpmpi.reduce}[coll]
                try:
                    fn_(x, y, "sum", comm=WORLD, **kw)
                except lpmpi.MismatchError as e:
                    check("acc_dtype" in str(e) and "float16 on rank 0" in str(e), f"message: {e}")
                else:
                    raise CaseFailure("no exception; expected MismatchError on acc_dtype")
                check(not y.any(), "recvbuf written")
                post_check(coll, "auto")
            M("acc_dtype float16-in-float32 vs float32", body)

        # mismatch inside split communicators
        def body():
            sub = WORLD.Split(RANK % 2, RANK)
            try:
                n = 5 if sub.Get_rank() == 0 else 6
                x = np.ones(n)
                y = np.zeros(n)
                if sub.Get_size() > 1:
                    expect_error("", lambda: call(x, y, comm=sub, alg="lp"), [x, y], (),
                                 mismatch=True)
                else:
                    call(x, y, comm=sub, alg="lp")
                post_check(coll, "lp", comm=sub)
            finally:
                sub.Free()
        M("count mismatch in Split subcomm", body)


def post_check(coll, alg, comm=WORLD):
    """After a mismatch every rank can still run a correct collective."""
    P, r = comm.Get_size(), comm.Get_rank()
    x = np.arange(17, dtype=np.float64) + r
    if coll == "bcast":
        lpmpi.bcast(x, root=P - 1, comm=comm, algorithm=alg, chunk_bytes=8)
        check(np.array_equal(x, np.arange(17) + P - 1), "collective after the mismatch is wrong")
    else:
        y = (lpmpi.allreduce(x, comm=comm, algorithm=alg, chunk_bytes=8) if coll == "allreduce"
             else lpmpi.reduce(x, root=0, comm=comm, algorithm=alg, chunk_bytes=8))
        if coll == "allreduce" or r == 0:
            check(np.array_equal(y, np.arange(17) * P + P * (P - 1) / 2),
                  "collective after the mismatch is wrong")


# --------------------------------------------------------------------------- bigmsg suite

def suite_bigmsg(h):
    """Run with LPMPI_MAX_MSG_BYTES small: message splitting on small arrays."""
    if not os.environ.get("LPMPI_MAX_MSG_BYTES"):
        h.fail("bigmsg suite", "LPMPI_MAX_MSG_BYTES must be set in the environment")
        return
    counts = [0, 1, 7, 33, 100] + ([1000] if SIZE <= 2 else [])
    dts = ["uint8", "float16", "float32", "float64", "complex128", "int64"]
    dt_r = Rot(dts)
    op_i = Rot(range(11))
    roots = Rot(range(SIZE))
    for coll in ("allreduce", "reduce", "bcast"):
        modes = Rot(MODES[coll])
        for alg in algs_for(coll):
            for count in counts:
                for chunk in (None, 8, 100, 1000, 100000):
                    dtn = dt_r()
                    opn = None
                    if coll != "bcast":
                        ops = valid_ops(dtn)
                        opn = ops[op_i() % len(ops)]
                    c = dict(coll=coll, alg=alg, dtype=dtn, op=opn, shape=[count], chunk=chunk,
                             mode=modes(), root=roots())
                    h.run("bigmsg " + describe(c), lambda c=c: run_case_dict(c, WORLD))


# --------------------------------------------------------------------------- determinism

def suite_determinism(h):
    """Same inputs / P / algorithm / chunk -> same bits: across repeats, in-place modes and
    ranks; DIGEST lines let the caller compare separate runs."""
    counts = [1, 13, 100] + ([4099] if SIZE <= 2 else [1000])
    for coll in ("allreduce", "reduce", "bcast"):
        for alg in algs_for(coll):
            for dtn, opn in (("float32", "sum"), ("float64", "avg"), ("float16", "sum"),
                             ("complex64", "sum"), ("float64", "sum")):
                for count in counts:
                    for chunk in (None, 24):
                        if coll == "bcast" and (opn != "sum" or dtn == "float16"):
                            continue
                        c = dict(coll=coll, alg=alg, dtype=dtn,
                                 op=None if coll == "bcast" else opn, shape=[count],
                                 chunk=chunk, root=SIZE // 2)

                        def fn(c=c):
                            digs = []
                            for rep, mode in enumerate(MODES[c["coll"]] * 2):
                                cc = dict(c, mode=mode)
                                out = capture_result(cc)
                                digs.append((mode, out))
                            vals = {d for _, d in digs if d is not None}
                            check(len(vals) <= 1, "different bits run to run / mode to mode: "
                                  + ", ".join(f"{m}:{d}" for m, d in digs))
                            return (0, vals.pop()) if vals else None
                        h.run("determinism " + describe(c), fn)


def capture_result(c):
    """Run a case (not checking values beyond the usual checks) and return the digest of the
    result on ranks that hold one."""
    P, r = SIZE, RANK
    dt = get_dtype(c["dtype"])
    count = int(np.prod(c["shape"]))
    seed = case_seed(dict(c, mode=None))
    kw = kwargs_for(c)
    if c["coll"] == "bcast":
        return run_bcast(c, WORLD)[1]
    x = make_input(seed, r, dt, c["op"], count)
    mode = c["mode"]
    root = c["root"] % P
    is_root = c["coll"] == "allreduce" or r == root
    if c["coll"] == "reduce":
        kw["root"] = root
    fn = lpmpi.allreduce if c["coll"] == "allreduce" else lpmpi.reduce
    if mode == "inplace" or (mode == "mixed" and is_root):
        res = fn(MPI.IN_PLACE, x, c["op"], **kw)
    elif mode == "same":
        res = fn(x, x, c["op"], **kw)
    elif mode == "out" or (mode == "out_root" and is_root):
        res = fn(x, np.empty_like(x), c["op"], **kw)
    else:
        res = fn(x, None, c["op"], **kw)
    if c["coll"] == "reduce":
        # everyone learns the root's digest so all ranks report the same thing
        return WORLD.bcast(digest(res) if is_root else None, root=root)
    return digest(res)


# --------------------------------------------------------------------------- JSON cases

def suite_cases(h, path):
    with open(path) as f:
        cases = json.load(f)
    for i, c in enumerate(cases):
        if c.get("P") not in (None, SIZE):
            continue
        c = {k: v for k, v in c.items() if k != "P"}
        if c.get("dtype") == "bfloat16" and BF16 is None:
            continue
        h.run(f"case#{i} " + describe(c), lambda c=c: run_case_dict(c, WORLD))


# --------------------------------------------------------------------------- device suite

class CAIView:
    """Another array's __cuda_array_interface__ with entries replaced (None value: removed)."""

    def __init__(self, base, **changes):
        self.base = base
        self.changes = changes

    @property
    def __cuda_array_interface__(self):
        d = dict(self.base.__cuda_array_interface__)
        for k, v in self.changes.items():
            if v is None:
                d.pop(k, None)
            else:
                d[k] = v
        return d


def suite_device(h):
    """Device arrays (--backend fakedev, cupy or torch-cuda): argument errors before any communication,
    the interface's stream and read-only flag, mixed host/device buffers."""
    if BACKEND == "numpy":
        h.fail("device suite", "needs --backend fakedev, cupy or torch-cuda")
        return
    P = SIZE
    dev = lambda a: to_backend(np.asarray(a))

    def E(desc, call, bufs, names, types=(TypeError, ValueError)):
        h.run(f"device errors {desc}", lambda: expect_error(desc, call, bufs, names, types))

    for coll in ("allreduce", "reduce", "bcast"):
        fn = {"allreduce": lpmpi.allreduce, "reduce": lpmpi.reduce, "bcast": lpmpi.bcast}[coll]
        x = dev(np.arange(10.0))
        if coll != "bcast":
            hy = np.zeros(10)
            E(f"{coll} mixed device sendbuf host recvbuf", lambda: fn(x, hy), [x, hy],
              ("sendbuf", "recvbuf"), (TypeError,))
            hx = np.arange(10.0)
            y = dev(np.zeros(10))
            E(f"{coll} mixed host sendbuf device recvbuf", lambda: fn(hx, y), [hx, y],
              ("sendbuf", "recvbuf"), (TypeError,))
            ro = CAIView(y, data=(y.__cuda_array_interface__["data"][0], True))
            E(f"{coll} readonly device recvbuf", lambda: fn(x, ro), [x, y], ("recvbuf",),
              (ValueError,))
            y32 = dev(np.zeros(10, np.float32))
            E(f"{coll} device dtype mismatch", lambda: fn(x, y32), [x, y32],
              ("sendbuf", "recvbuf", "dtype"), (TypeError,))
            y9 = dev(np.zeros(9))
            E(f"{coll} device count mismatch", lambda: fn(x, y9), [x, y9],
              ("sendbuf", "recvbuf"), (ValueError,))
            E(f"{coll} avg on int device", lambda: fn(dev(np.arange(4)), None, "avg"), [],
              ("op", "avg", "dtype"), (TypeError,))
        name = "buf" if coll == "bcast" else "sendbuf"
        if coll == "bcast":
            ro = CAIView(x, data=(x.__cuda_array_interface__["data"][0], True))
            E("bcast readonly device buf", lambda: fn(ro), [x], ("buf",), (ValueError,))
        z = dev(np.zeros((4, 5)))
        nc = CAIView(z, shape=(4, 3), strides=(40, 8))
        E(f"{coll} non-contiguous device {name}", lambda: fn(nc), [z], (name,), (ValueError,))
        s0 = CAIView(x, stream=0)
        E(f"{coll} device {name} stream 0", lambda: fn(s0), [x], (name,), (ValueError,))
        bad = CAIView(x, typestr=None)
        E(f"{coll} device {name} without typestr", lambda: fn(bad), [x], (name,), (TypeError,))
        m8 = CAIView(x, typestr="<M8")
        E(f"{coll} device {name} datetime typestr", lambda: fn(m8), [x], (name, "dtype"),
          (TypeError,))
        msk = CAIView(x, mask=(0, False))
        E(f"{coll} masked device {name}", lambda: fn(msk), [x], (name,), (TypeError,))
        if coll != "bcast":
            E(f"{coll} device root out of range",
              lambda: fn(x, None, "sum", P + 3) if coll == "reduce" else fn(x, None, "sum", None,
                                                                                 algorithm="nope"),
              [x], ("root", "algorithm"), (ValueError,))

    # the interface's stream: waited for before reading; strides given but C-contiguous
    def stream_cases():
        base = np.arange(24, dtype=np.float32).reshape(2, 3, 4) + RANK
        exp = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * P + P * (P - 1) / 2
        x = dev(base)
        views = [CAIView(x, stream=1), CAIView(x, strides=(48, 16, 4)), CAIView(x, stream=None)]
        if BACKEND == "cupy":
            import cupy
            views.append(CAIView(x, stream=2))
            s = cupy.cuda.Stream(non_blocking=True)
            with s:              # the writes are queued on s; the interface names s
                big = cupy.zeros(1 << 22, cupy.float32)
                big += RANK + 1
                view = CAIView(big, stream=s.ptr)
                out = lpmpi.allreduce(view, cupy.empty_like(big), algorithm="lp",
                                      chunk_bytes=1 << 18)
            got = out.get()
            check(np.all(got == P * (P + 1) / 2), "stream: the write queued on the array's "
                  f"stream was not waited for ({got[:4]} ...)")
        if BACKEND == "torch-cuda":
            import torch
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):   # DLPack: lpmpi names its stream, torch orders s before it
                big = torch.zeros(1 << 22, dtype=torch.float32, device="cuda")
                big += RANK + 1
                out = lpmpi.allreduce(big, algorithm="lp", chunk_bytes=1 << 18)
                got = out.cpu().numpy()
            check(np.all(got == P * (P + 1) / 2), "stream: the write queued on the tensor's "
                  f"stream was not waited for ({got[:4]} ...)")
            check(out.is_cuda and out.dtype == torch.float32, f"recvbuf=None gave {out.device}")
            bf = torch.full((1000,), RANK + 0.5, dtype=torch.bfloat16, device="cuda")
            sbf = lpmpi.allreduce(bf, algorithm="lp")
            want = float(torch.tensor(sum(r + 0.5 for r in range(P)), dtype=torch.bfloat16))
            check(sbf.dtype == torch.bfloat16 and bool((sbf.float() == want).all()),
                  f"bfloat16 device sum {sbf[:3]}, expected {want}")
            try:
                lpmpi.allreduce(bf, acc_dtype="float32")
            except TypeError as e:
                check("acc_dtype" in str(e), f"acc_dtype on device: {e}")
            else:
                check(False, "acc_dtype on a device tensor did not raise TypeError")
        for v in views:
            for alg in ("lp", "native"):
                y = dev(np.zeros((2, 3, 4), np.float32))
                lpmpi.allreduce(v, y, algorithm=alg, chunk_bytes=40)
                d = describe_diff(y, exp)
                check(d is None, f"{alg} with {v.changes}: {d}")
    h.run("device stream and strides", stream_cases)

    # recvbuf=None allocates the backend's array, for every collective and algorithm
    def alloc_cases():
        for alg in algs_for("allreduce"):
            y = lpmpi.allreduce(dev(np.full((3, 5), RANK, np.int32)), algorithm=alg)
            check(isinstance(y, backend_types()), f"allreduce {alg}: {type(y).__name__}")
            check(tuple(y.shape) == (3, 5), f"allreduce {alg}: shape {y.shape}")
            check(np.all(to_host(y) == P * (P - 1) // 2), f"allreduce {alg}: wrong result")
        for alg in algs_for("reduce"):
            y = lpmpi.reduce(dev(np.full(7, 1.5)), root=P - 1, algorithm=alg)
            if RANK == P - 1:
                check(isinstance(y, backend_types()) and np.all(to_host(y) == 1.5 * P),
                      f"reduce {alg}: {y!r}")
            else:
                check(y is None, f"reduce {alg}: non-root got {type(y).__name__}")
    h.run("device recvbuf=None", alloc_cases)

    # the device kernels compute what the host kernels compute: same bits for every pairing
    def kernels_equal():
        bad = []
        for dtn in DTYPE_NAMES:
            if BACKEND == "cupy" and dtn == "bfloat16":
                continue
            dt = get_dtype(dtn)
            for opn in valid_ops(dtn):
                x = make_input(zlib.crc32(f"{dtn}{opn}".encode()), RANK, dt, opn, 1000)
                for alg in ("lp", "mst"):
                    host = lpmpi.allreduce(x, op=opn, algorithm=alg, chunk_bytes=256)
                    got = to_host(lpmpi.allreduce(dev(x), op=opn, algorithm=alg, chunk_bytes=256))
                    if got.tobytes() != host.tobytes():
                        bad.append(f"{alg}/{dtn}/{opn}: {describe_diff(got, host, bitwise=True)}")
        check(not bad, "device results differ from the host path's: " + "; ".join(bad[:6]))
    h.run("device kernels equal host kernels", kernels_equal)


# --------------------------------------------------------------------------- forms

def use_form(form):
    """Replace lpmpi.allreduce / reduce / bcast, for this process, by the same call made in
    `form` (nonblocking: i* + wait; persistent: *_init + start + wait, twice when not in
    place), so every suite checks that form with its own cases."""
    if form == "blocking":
        return
    for name in ("allreduce", "reduce", "bcast"):
        if form == "nonblocking":
            start = getattr(lpmpi, "i" + name)

            def call(*args, _start=start, **kw):
                req = _start(*args, **kw)
                check(isinstance(req, lpmpi.Request), f"returned {type(req).__name__}, not a Request")
                res = req.wait()
                check(req.done and req.test(), "request not done after wait()")
                check(req.wait() is res, "a second wait() returned something else")
                return res
        else:
            init = getattr(lpmpi, name + "_init")

            def call(*args, _init=init, _name=name, **kw):
                p = _init(*args, **kw)
                check(p.done, "a persistent request is active before start()")
                send = args[0] if args else kw.get("buf" if _name == "bcast" else "sendbuf")
                recv = (args[1] if len(args) > 1 else kw.get("recvbuf")) if _name != "bcast" else None
                in_place = send is MPI.IN_PLACE or (recv is not None and recv is send)
                rounds = 1 if in_place or _name == "bcast" else 2
                # the same number of starts on every rank (reduce: in place on the root only)
                rounds = (kw.get("comm") or WORLD).allreduce(rounds, op=MPI.MIN)
                res = None
                for _ in range(rounds):
                    p.start()
                    res = p.wait()
                p.free()
                return res
        setattr(lpmpi, name, call)


# --------------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", choices=["allreduce", "reduce", "bcast", "comms", "errors", "check",
                                      "bigmsg", "determinism", "cases", "device"])
    ap.add_argument("--backend", choices=["numpy", "torch", "torch-cuda", "dlpack", "fakedev", "cupy"], default="numpy",
                    help="array backend of the matrices' buffers")
    ap.add_argument("--form", choices=["blocking", "nonblocking", "persistent"], default="blocking",
                    help="make every collective of the suite in this form")
    ap.add_argument("--stride", type=int, default=1,
                    help="run about 1/N of the cases (deterministic hash of the description)")
    ap.add_argument("--filter", default=None, help="regex over case descriptions")
    ap.add_argument("--cases", default=None, help="JSON file of case dicts (suite 'cases')")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    ap.add_argument("--total-timeout", type=float, default=1800.0,
                    help="seconds for the whole run (faulthandler backstop)")
    ap.add_argument("--max-print", type=int, default=40, help="failures printed per rank")
    ap.add_argument("--list", action="store_true", help="list the selected cases only")
    ap.add_argument("--digests", action="store_true", help="print DIGEST lines of results")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    global BACKEND
    BACKEND = args.backend
    if BACKEND == "fakedev" and os.environ.get("LPMPI_EMULATE_STAGING") != "1":
        ap.error("--backend fakedev needs LPMPI_EMULATE_STAGING=1 (host emulation of device memory)")
    use_form(args.form)
    t0 = time.time()
    h = Harness(args)
    if BF16 is None and RANK == 0 and not args.list:
        print("NOTE bfloat16 cases skipped: ml_dtypes is not importable", flush=True)
    s = args.suite
    if s in ("allreduce", "reduce", "bcast"):
        suite_matrix(h, s)
    elif s == "comms":
        suite_comms(h)
    elif s == "errors":
        suite_errors(h)
    elif s == "check":
        suite_check(h)
    elif s == "bigmsg":
        suite_bigmsg(h)
    elif s == "determinism":
        suite_determinism(h)
    elif s == "device":
        suite_device(h)
    elif s == "cases":
        if not args.cases:
            ap.error("--cases FILE is required")
        suite_cases(h, args.cases)
    if args.list:
        return 0
    return h.finish(s, t0)


if __name__ == "__main__":
    sys.exit(main())
