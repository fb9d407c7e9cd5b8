#!/usr/bin/env python
"""algorithm="auto" under one machine's shipped tables: right results, no hang (issue 37).

    LPMPI_TABLES_AS=NAME mpiexec -n 2 python tests/table_cases.py [--max-bytes N]

Every collective (allreduce, reduce, bcast, allgather, reduce_scatter) runs "auto" at element
counts on each side of every boundary of every row the applied tables hold for this P (plain and
acc_dtype rows, converted to elements as tests/decision_cases.py does), with acc_dtype="float32"
on float16 / bfloat16 where the collective takes it, every root in turn, in place and out of
place, blocking / nonblocking / persistent in turn.  Inputs are small integers, so every result
(float16 and bfloat16 sums included) is exact and compared bit for bit with numpy's.  Run it
with LPMPI_TIMEOUT set: a call the ranks decided differently raises LPError (the watchdog)
instead of hanging.  Above 1 MiB only float32 runs, one count on each side of a boundary.

``FAIL rank=R case=...`` per failure; rank 0 prints ``SUMMARY``; exit 1 on any failure.
"""
# ruff: noqa: BLE001, C408
from __future__ import annotations

import argparse
import sys
import time
import traceback

import decision_cases as dc
import numpy as np

lpmpi, tables = dc.lpmpi, dc.tables
WORLD, RANK, SIZE = dc.WORLD, dc.RANK, dc.SIZE
BIG = 1 << 20


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def counts(coll, dt, acc, bounds, max_bytes):
    f = SIZE if coll in dc.BLOCKED else 1
    per = 4 if acc else dt.itemsize
    out = []
    for b in sorted(bounds.get((coll, False), set()) | bounds.get((coll, acc), set())):
        for d in {per * f} | ({2 * f} if acc else set()):
            c = int(b // d)
            near = (c - 1, c, c + 1) if b < BIG else (c - 1, c + 1)
            out.extend(n for n in near if n >= 0 and n * per * f <= max_bytes)
    return sorted(set(out) | {0, 1, 7})


def cases(bounds, max_bytes):
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    kinds = [(f32, None, "sum"), (np.dtype(np.int32), None, "max")]
    kinds += [(f16, "float32", "sum")] + ([(dc.BF16, "float32", "sum")] if dc.BF16 is not None else [])
    i = 0
    for coll in dc.COLLS:
        for dt, acc, op in kinds:
            if acc and coll not in dc.ACC_COLLS:
                continue
            if coll in ("bcast", "allgather") and dt.kind == "i":
                continue
            for n in counts(coll, dt, acc is not None, bounds, max_bytes):
                if n * dt.itemsize * (SIZE if coll in dc.BLOCKED else 1) > BIG and dt != f32:
                    continue
                i += 1
                yield dict(coll=coll, dt=dt, acc=acc, op=op, n=n, root=i % SIZE,
                           inplace=bool(i // SIZE % 2), form=dc.FORMS[i % 3])


def describe(c):
    return (f"{c['coll']} dtype={c['dt'].name} acc={c['acc']} op={c['op']} count={c['n']} "
            f"root={c['root']} {'in place' if c['inplace'] else 'out of place'} form={c['form']}")


_base = {}


def data(dt, n, rank):
    """(rank + 1) * (i % 5): small integers, exact in every dtype and in their sums here."""
    key = dt.str
    if key not in _base or len(_base[key]) < n:
        _base[key] = (np.arange(max(n, 1 << 16)) % 5).astype(dt)
    return _base[key][:n] * dt.type(rank + 1)


def run(c, comm):
    coll, dt, n, op, root = c["coll"], c["dt"], c["n"], c["op"], c["root"]
    kw = {"comm": comm}
    if c["acc"]:
        kw["acc_dtype"] = c["acc"]
    tot = SIZE * (SIZE + 1) // 2

    def call(name, *a, **k):
        form = c["form"]
        if form == "blocking":
            return getattr(lpmpi, name)(*a, **k)
        if form == "nonblocking":
            return getattr(lpmpi, "i" + name)(*a, **k).wait()
        req = getattr(lpmpi, name + "_init")(*a, **k)
        req.start()
        res = req.wait()
        req.free()
        return res

    def want(block):     # the reduction of every rank's data(block)
        b = data(dt, block, 0)
        return b * dt.type(tot) if op == "sum" else b * dt.type(SIZE)

    if coll == "bcast":
        x = data(dt, n, root) if RANK == root else np.zeros(n, dt)
        call("bcast", x, root=root, comm=comm)
        return np.array_equal(x, data(dt, n, root)), "bcast result"
    if coll == "allgather":
        mine = data(dt, n, RANK)
        if c["inplace"]:
            recv = np.zeros(SIZE * n, dt)
            recv[RANK * n:(RANK + 1) * n] = mine
            call("allgather", lpmpi.IN_PLACE, recv, comm=comm)
        else:
            recv = call("allgather", mine, np.zeros(SIZE * n, dt), comm=comm)
        exp = np.concatenate([data(dt, n, q) for q in range(SIZE)]) if n else np.zeros(0, dt)
        return np.array_equal(recv.reshape(-1), exp), "allgather result"
    if coll == "reduce_scatter":
        x = data(dt, SIZE * n, RANK)
        if c["inplace"]:
            call("reduce_scatter", lpmpi.IN_PLACE, x, op=op, **kw)
            got = x[:n]
        else:
            got = call("reduce_scatter", x, np.zeros(n, dt), op=op, **kw)
        exp = want(SIZE * n)[RANK * n:(RANK + 1) * n]
        return np.array_equal(got, exp), "reduce_scatter result"
    x = data(dt, n, RANK)
    if coll == "reduce":
        if c["inplace"]:
            call("reduce", lpmpi.IN_PLACE, x, op=op, root=root, **kw)
            got = x
        else:
            got = call("reduce", x, None, op=op, root=root, **kw)
            if RANK != root:
                return got is None and np.array_equal(x, data(dt, n, RANK)), "non-root"
        return (RANK != root or np.array_equal(got, want(n))), "reduce result"
    if c["inplace"]:
        call("allreduce", lpmpi.IN_PLACE, x, op=op, **kw)
        got = x
    else:
        got = call("allreduce", x, None, op=op, **kw)
    return np.array_equal(got, want(n)), "allreduce result"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-bytes", type=int, default=96 << 20,
                    help="largest message (the blocked collectives: their P blocks)")
    args = ap.parse_args()
    st = tables.status()
    bounds = dc.boundaries(st, "host")
    comm = WORLD.Dup()
    t0 = time.monotonic()
    n = nfail = 0
    for c in cases(bounds, args.max_bytes):
        n += 1
        ok, what, err = False, "", None
        try:
            ok, what = run(c, comm)
        except Exception:
            err = traceback.format_exc(limit=4)
        if not ok:
            say(f"FAIL rank={RANK} case={describe(c)}: {err or 'wrong ' + what}")
        bad = comm.allreduce(0 if ok else 1)
        nfail += bool(bad)
        if bad and err and "LPMPI_TIMEOUT" in err:
            break           # the communicator is unusable after the watchdog
    if RANK == 0:
        applied = [t.path.rsplit("/", 1)[-1] for t in st.applied]
        say(f"SUMMARY suite=tables P={SIZE} tables_as={st.tables_as} tables={applied} "
            f"cases={n} failed={nfail} {time.monotonic() - t0:.1f}s")
    comm.Free()
    sys.exit(1 if nfail else 0)


if __name__ == "__main__":
    main()
