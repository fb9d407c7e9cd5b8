"""acc_dtype="float32": float16 / bfloat16 sums carried in float32 and rounded once.

Under mpiexec at P = 2, 3 and 5, for allreduce, reduce and reduce_scatter (every algorithm, float16 and
bfloat16 as numpy and as torch tensors, sum and avg): the result is within one unit in the last
place of the float64 sum of the inputs rounded once to the 16-bit type (in fact equal to it
almost always), identical on every rank and in every form (blocking, in place, nonblocking,
persistent started twice, waitall, small chunks), and a reduce's non-root recvbuf stays untouched.  Without
acc_dtype, P >= 3 shows the errors it removes.  Argument errors: TypeError before any
communication."""
import sys
import textwrap

import numpy as np
import pytest
from _mpi import NO_TORCH, child_env, mpiexec, run

import lpmpi

SCRIPT = r"""
import os, sys
import numpy as np, lpmpi
from mpi4py import MPI
try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BF16 = None
try:
    import torch
except ImportError:
    torch = None
w = MPI.COMM_WORLD
P, me = w.Get_size(), w.Get_rank()

def ordered(bits):
    b = bits.astype(np.int32)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)

def bits(y):
    if torch is not None and isinstance(y, torch.Tensor):
        return y.view(torch.int16).numpy().view(np.uint16).copy()
    return np.asarray(y).view(np.uint16).copy()

def as_kind(a, kind):
    if kind == "numpy":
        return a.copy()
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())

bad = []

def judge(desc, res, ref16):   # the blocking result within 1 ulp, every form's bits equal to it
    b0 = bits(res["blocking"])
    ulps = np.abs(ordered(b0) - ref16).max()
    if ulps > 1:
        bad.append(f"{desc}: {ulps} ulp from the once-rounded sum")
    for form, v in res.items():
        if not np.array_equal(bits(v), b0):
            bad.append(f"{desc}: {form} differs from blocking")
    return b0

n = 3001
dts = [np.dtype(np.float16)] + ([BF16] if BF16 is not None else [])
kinds = ["numpy"] + (["torch"] if torch is not None else [])
worse_without = 0
for dt in dts:
    xs = [np.random.default_rng(7 + r).standard_normal(n).astype(dt) for r in range(P)]
    for opn in ("sum", "avg"):
        ref = sum(x.astype(np.float64) for x in xs)
        if opn == "avg":
            ref = ref / P
        ref16 = ordered(ref.astype(np.float32).astype(dt).view(np.uint16))
        for coll in ("allreduce", "reduce"):
            root = P - 1 if coll == "reduce" else None
            is_root = root is None or me == root
            for alg in lpmpi.algorithms(coll):
                for kind in kinds:
                    x = as_kind(xs[me], kind)
                    kw = dict(op=opn, algorithm=alg, acc_dtype="float32")
                    if root is not None:
                        kw["root"] = root
                    fn = getattr(lpmpi, coll)
                    ifn = getattr(lpmpi, "i" + coll)
                    init = getattr(lpmpi, coll + "_init")
                    call = lambda f, *a: f(*a, **kw)
                    res = {"blocking": call(fn, x)}
                    inp = as_kind(xs[me], kind)
                    if is_root:                   # in place: IN_PLACE and the data as recvbuf
                        call(fn, lpmpi.IN_PLACE, inp)
                    else:
                        call(fn, inp)
                    res["inplace"] = inp if is_root else None
                    res["nonblocking"] = call(ifn, x).wait()
                    out = as_kind(np.zeros(n, dt), kind)
                    before = bits(out)
                    p = call(init, x, out)
                    for _ in range(2):
                        p.start(); p.wait()
                    p.free()
                    res["persistent"] = out if is_root else None
                    if not is_root and not np.array_equal(bits(out), before):
                        bad.append(f"{coll} {alg} {kind}: non-root recvbuf written")
                    res["waitall"] = lpmpi.waitall([call(ifn, x), call(ifn, x)])[1]
                    if alg in ("lp", "ring"):     # many chunks: rounded chunk by chunk
                        res["chunked"] = fn(x, chunk_bytes=1024, **kw)
                        res["chunked_nb"] = ifn(x, chunk_bytes=1024, **kw).wait()
                    desc = f"{coll} {alg} {dt.name} {opn} {kind}"
                    plain = fn(x, **{k: v for k, v in kw.items() if k != "acc_dtype"})
                    if not is_root:
                        if any(v is not None for v in (res["blocking"], res["nonblocking"])):
                            bad.append(f"{desc}: a non-root got a result")
                        continue
                    b0 = judge(desc, res, ref16)
                    if coll == "allreduce":
                        digests = w.allgather(b0.tobytes())
                        if len(set(digests)) != 1:
                            bad.append(f"{desc}: ranks differ")
                    worse_without += int(np.abs(ordered(bits(plain)) - ref16).max() > 1)
    # reduce_scatter: block me of the P blocks' sum, rounded once; in place: in the first block
    m = 997
    xr = [np.random.default_rng(70 + r).standard_normal(P * m).astype(dt) for r in range(P)]
    for opn in ("sum", "avg"):
        ref = sum(x.astype(np.float64) for x in xr)[me * m:(me + 1) * m]
        if opn == "avg":
            ref = ref / P
        ref16 = ordered(ref.astype(np.float32).astype(dt).view(np.uint16))
        for alg in lpmpi.algorithms("reduce_scatter"):
            for kind in kinds:
                x = as_kind(xr[me], kind)
                kw = dict(op=opn, algorithm=alg, acc_dtype="float32")
                desc = f"reduce_scatter {alg} {dt.name} {opn} {kind}"
                res = {"blocking": lpmpi.reduce_scatter(x, **kw)}
                inp = as_kind(xr[me], kind)
                lpmpi.reduce_scatter(lpmpi.IN_PLACE, inp, **kw)
                res["inplace"] = inp[:m]
                res["nonblocking"] = lpmpi.ireduce_scatter(x, **kw).wait()
                out = as_kind(np.zeros(m, dt), kind)
                p = lpmpi.reduce_scatter_init(x, out, **kw)
                for _ in range(2):
                    p.start(); p.wait()
                p.free()
                res["persistent"] = out
                res["waitall"] = lpmpi.waitall([lpmpi.ireduce_scatter(x, **kw), lpmpi.ireduce_scatter(x, **kw)])[1]
                res["chunked"] = lpmpi.reduce_scatter(x, chunk_bytes=1024, **kw)
                if not np.array_equal(bits(x), bits(as_kind(xr[me], kind))):
                    bad.append(f"{desc}: sendbuf written")
                judge(desc, res, ref16)
                plain = lpmpi.reduce_scatter(x, op=opn, algorithm=alg)
                worse_without += int(np.abs(ordered(bits(plain)) - ref16).max() > 1)
if P >= 3 and me == P - 1 and worse_without == 0:   # (the reduce root)
    bad.append("without acc_dtype no case was off by more than 1 ulp: the check cannot tell")
for b in bad[:20]:
    print(f"FAIL rank {me}: {b}", flush=True)
ok = w.allreduce(0 if bad else 1, op=MPI.MIN)
if ok:
    os.write(1, b"OK %d\n" % me)
sys.exit(0 if ok else 1)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", (2, 3, 5), ids=lambda p: f"P{p}")
def test_acc_dtype_rounds_once_everywhere(tmp_path, nprocs):
    script = tmp_path / "acc.py"
    script.write_text(textwrap.dedent(SCRIPT))
    rc, out, _ = run([mpiexec(), "-n", str(nprocs), sys.executable, str(script)], child_env(), 600)
    assert rc == 0, f"exit status {rc}:\n{out[-8000:]}"
    assert out.count("OK ") == nprocs, out[-4000:]


@pytest.mark.parametrize("call,words", [
    (lambda: lpmpi.allreduce(np.ones(4, np.float32), acc_dtype="float32"), "float16 or bfloat16"),
    (lambda: lpmpi.allreduce(np.ones(4, np.int16), acc_dtype="float32"), "not int16"),
    (lambda: lpmpi.allreduce(np.ones(4, np.float16), op="max", acc_dtype="float32"), "'max'"),
    (lambda: lpmpi.reduce(np.ones(4, np.float16), op="prod", acc_dtype="float32"), "'prod'"),
    (lambda: lpmpi.allreduce(np.ones(4, np.float16), acc_dtype="float64"), "None or 'float32'"),
    (lambda: lpmpi.iallreduce(np.ones(4, np.float16), acc_dtype=np.float16), "None or 'float32'"),
    (lambda: lpmpi.allreduce_init(np.ones(4, np.float16), op="min", acc_dtype="float32"), "'min'"),
])
def test_acc_dtype_errors(call, words):
    with pytest.raises(TypeError, match=words.replace("(", r"\(")):
        call()


def test_acc_dtype_spellings_and_result_kind():
    x = np.array([1.0, 2.5, -3.0], np.float16)
    for spelled in ("float32", np.float32, np.dtype(np.float32)):
        y = lpmpi.allreduce(x, acc_dtype=spelled)
        assert y.dtype == np.float16 and np.array_equal(y, x)
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    t = torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    y = lpmpi.allreduce(t, op="avg", acc_dtype=torch.float32)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16 and torch.equal(y, t)
