
import os
import random

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD
P, me = w.Get_size(), w.Get_rank()

def data(i, n, dt=np.float64):
    return (np.arange(n) % 97 + me + i).astype(dt)

def total(i, n, dt=np.float64):
    return sum((np.arange(n) % 97 + r + i).astype(dt) for r in range(P))

def ok():   # one write: the ranks' lines never interleave
    os.write(1, b"OK %d\n" % me)

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
