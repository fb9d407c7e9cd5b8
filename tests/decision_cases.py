#!/usr/bin/env python
"""Every rank takes the same decision, under every shipped table (issue 37).

    mpiexec -n P python tests/decision_cases.py [--profiles all|model|NAME,...] [--quick]

A profile is the cost model alone ("model": no table), or the machine a shipped table was
measured on (its MPI library and CPU model): the shipped tables are loaded as they apply there
(``lpmpi.tables.load(tables_as=NAME)``, what ``LPMPI_TABLES_AS`` does), whatever CPU this runs on.
For each profile, on a fresh communicator, every rank asks the engine what each call of the
matrix would run (``lpmpi._core.call_decision``: the call's own argument checks, buffers, key
and decision, without communicating), and one allgather compares them: algorithm, chunk,
staging, asked and resolved node-local transport, source and key.

The matrix: collective x dtype x acc_dtype x op x count x root x in place / out of place x
form (blocking, nonblocking, persistent).  Counts: 0, 1, the powers of two and three times them
(each +-1: the model's crossovers and its node-local transport rule sit between them), and on
each side of every boundary of every row of the profile's tables for this P, converted to
elements for the case's collective (allgather and reduce_scatter are keyed by their P blocks),
dtype and accumulation (acc_dtype rows are keyed by the 16-bit message, the others by the
float32 copy).  Run with LPMPI_EMULATE_STAGING=1, every buffer is device memory to the engine
(the device tables' rows apply; acc_dtype is host-only and refused alike on every rank).

A disagreement prints ``FAIL profile=... case=...: rank 0 ..., rank 1 ...``; a case that raises
on some ranks but not others fails too (the same error everywhere is the call's contract).
Rank 0 prints ``SUMMARY`` per profile and at the end; every rank exits 1 on any failure.
"""
# ruff: noqa: BLE001
from __future__ import annotations

import argparse
import math
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


try:
    import lpmpi
    from lpmpi import _core, tables
except Exception:
    say(f"FAIL rank={RANK} case=import lpmpi: {traceback.format_exc()}")
    sys.exit(2)

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except Exception:
    BF16 = None

COLLS = ("allreduce", "reduce", "bcast", "allgather", "reduce_scatter")
BLOCKED = ("allgather", "reduce_scatter")      # keyed by the bytes of their P blocks
ACC_COLLS = ("allreduce", "reduce", "reduce_scatter")
FORMS = ("blocking", "nonblocking", "persistent")


def dtypes():
    out = [np.dtype(np.uint8), np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64),
           np.dtype(np.complex128)]
    if BF16 is not None:
        out.insert(2, BF16)
    return out


def ops_for(dt):
    if dt.kind == "c":
        return ("sum", "avg")
    if dt.kind == "f" or dt == BF16:
        return ("sum", "avg", "max")
    return ("sum", "max", "band")


def profiles(arg):
    """[(name, tables_as or None)]: the model alone, then one per machine of the shipped tables."""
    machines = {}
    names = [p.rsplit("/", 1)[-1] for p in tables.shipped_tables()]
    for name in sorted(names, key=lambda n: ("-host" not in n, "-acc" in n, n)):   # named by a host table
        machines.setdefault(tables.machine_of(name), name)
    allp = [("model", None)] + [(name, name) for name in machines.values()]
    if arg == "all":
        return allp
    want = arg.split(",")
    out = [p for p in allp if p[0] in want]
    for w in want:      # a shipped table that shares its machine with an earlier one
        if w not in [p[0] for p in out] and w != "model":
            out.append((w, w))
    return out


def load_profile(tables_as):
    """The engine's tables as on that machine (None: none at all, the cost model's defaults)."""
    if tables_as is None:
        saved = tables._candidates
        tables._candidates = lambda: ("disabled", [])
        try:
            return tables.load(tables_as="")
        finally:
            tables._candidates = saved
    return tables.load(tables_as=tables_as)


def boundaries(st, memory):
    """{(collective, acc): sorted finite row bounds} of the applied tables for this P."""
    out = {}
    for acc in (False, True):
        for t in st.tables_for(SIZE, memory, acc):
            for r in t.rows:
                for b in (r.lo, r.hi):
                    if math.isfinite(b) and b > 0:
                        out.setdefault((r.collective, acc), set()).add(b)
    return out


def sweep():
    out = {0, 1, 2, 3}
    for k in range(28):
        for b in (1 << k, 3 << k):
            out.update((b - 1, b, b + 1))
    return out


def counts_for(coll, dt, acc, bounds, quick):
    """Element counts (per rank's block for the blocked collectives) around every boundary."""
    f = SIZE if coll in BLOCKED else 1
    per = 4 if acc else dt.itemsize               # the engine's element: acc's float32 copy
    divisors = {per * f} | ({2 * f} if acc else set())   # acc rows: the 16-bit message's bytes
    raw = set()
    for b in bounds.get((coll, False), set()) | bounds.get((coll, acc), set()):
        for d in divisors:
            c = b / d
            raw.update((math.floor(c) - 1, math.floor(c), math.ceil(c), math.ceil(c) + 1))
    for b in sweep():
        for d in divisors:
            raw.add(b // d)
    counts = sorted(c for c in raw if 0 <= c and c * per * f <= (192 << 20))
    if quick:
        counts = counts[::3]
    return counts


class Arena:
    """Untouched (lazily mapped) buffers to take the cases' arrays from."""

    def __init__(self, nbytes, device):
        self.raw = [np.empty(nbytes + 64, np.uint8) for _ in range(2)]
        self.device = device

    def get(self, i, dt, count):
        a = self.raw[i][: count * dt.itemsize].view(dt)
        if self.device:
            from lpmpi._devarray import HostDeviceArray
            return HostDeviceArray(a)
        return a


def cases(bounds, quick):
    """(description, collective, kwargs-maker) for every case of the matrix."""
    for coll in COLLS:
        for dt in dtypes():
            accs = (None, "float32") if coll in ACC_COLLS and dt.itemsize == 2 and dt.kind != "u" else (None,)
            for acc in accs:
                ops = ("sum", "avg") if acc else ops_for(dt) if coll != "bcast" and coll != "allgather" else ("-",)
                cs = counts_for(coll, dt, acc is not None, bounds, quick)
                roots = range(SIZE) if coll in ("reduce", "bcast") else (0,)
                places = (False,) if coll == "bcast" else (False, True)
                for i, n in enumerate(cs):
                    for op in ops if i % 4 == 0 else ops[:1]:
                        for root in roots:
                            for inplace in places:
                                form = FORMS[(i + root + inplace) % 3]
                                yield (coll, dt, acc, op, n, root, inplace, form)


SKEW = False


def call(arena, coll, dt, acc, op, n, root, inplace, form):
    if SKEW and RANK == SIZE - 1:
        n += 1
    kw = {"form": form}
    if acc:
        kw["acc_dtype"] = acc
    if coll == "bcast":
        return _core.call_decision("bcast", arena.get(0, dt, n), root=root, **kw)
    if coll == "allgather":
        recv = arena.get(1, dt, n * SIZE)
        if inplace:
            return _core.call_decision("allgather", lpmpi.IN_PLACE, recv, **kw)
        return _core.call_decision("allgather", arena.get(0, dt, n), recv, **kw)
    if coll == "reduce_scatter":
        send = arena.get(0, dt, n * SIZE)
        if inplace:
            return _core.call_decision("reduce_scatter", lpmpi.IN_PLACE, send, op=op, **kw)
        return _core.call_decision("reduce_scatter", send, arena.get(1, dt, n), op=op, **kw)
    x = arena.get(0, dt, n)
    if coll == "reduce":
        if inplace:
            return _core.call_decision("reduce", lpmpi.IN_PLACE, x, op=op, root=root, **kw)
        return _core.call_decision("reduce", x, arena.get(1, dt, n) if RANK == root else None,
                                   op=op, root=root, **kw)
    if inplace:
        return _core.call_decision("allreduce", lpmpi.IN_PLACE, x, op=op, **kw)
    return _core.call_decision("allreduce", x, arena.get(1, dt, n), op=op, **kw)


def describe(c):
    coll, dt, acc, op, n, root, inplace, form = c
    return (f"{coll} dtype={dt.name} acc={acc} op={op} count={n} root={root} "
            f"{'in place' if inplace else 'out of place'} form={form}")


def run_profile(name, tables_as, args, device):
    st = load_profile(tables_as)
    memory = "cuda" if device else "host"
    if tables_as is not None:
        applied = [t.path.rsplit("/", 1)[-1] for t in st.applied]
        if tables_as not in applied:
            say(f"FAIL rank={RANK} profile={name} case=load: {tables_as} not applied ({applied}; "
                f"{st.ignored} {st.other_cpu})")
            return 1, 0
    comm = WORLD.Dup()                       # prepared afresh: the table agreement on these rows
    bounds = boundaries(st, memory)
    arena = Arena(200 << 20, device)
    mine = []
    t0 = time.monotonic()
    allc = list(cases(bounds, args.quick))
    for c in allc:
        try:
            d = call(arena, *c)
            mine.append((d["algorithm"], d["chunk_bytes"], d["staging_buffers"], d["transport"],
                         d["ring_transport"], d["source"], d["key"]))
        except Exception as exc:
            mine.append(("raised", type(exc).__name__, str(exc)))
    allv = comm.allgather(mine)
    comm.Free()
    fails = 0
    for i, c in enumerate(allc):
        vals = [allv[r][i] for r in range(SIZE)]
        if any(v != vals[0] for v in vals):
            fails += 1
            if RANK == 0 and fails <= 40:
                say(f"FAIL profile={name} P={SIZE} memory={memory} case={describe(c)}: "
                    + "; ".join(f"rank {r}: {v}" for r, v in enumerate(vals)))
    if RANK == 0:
        rows = sum(len(t.rows) for t in st.applied)
        algs = sorted({v[0] for v in mine})
        say(f"SUMMARY profile={name} P={SIZE} memory={memory} tables="
            f"{[t.path.rsplit('/', 1)[-1] for t in st.applied]} rows={rows} cases={len(allc)} "
            f"failed={fails} algorithms={algs} {time.monotonic() - t0:.1f}s")
    return fails, len(allc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", default="all")
    ap.add_argument("--quick", action="store_true", help="every third count")
    ap.add_argument("--skew", action="store_true",
                    help="the harness's own check: the last rank asks about one element more in every "
                         "case, so every case must be reported as a disagreement")
    args = ap.parse_args()
    global SKEW
    SKEW = args.skew
    device = bool(lpmpi.engine.device_info().get("emulated"))
    total = nfail = 0
    for name, tables_as in profiles(args.profiles):
        f, n = run_profile(name, tables_as, args, device)
        nfail += f
        total += n
    if RANK == 0:
        say(f"SUMMARY all P={SIZE} cases={total} failed={nfail}")
    WORLD.Barrier()
    sys.exit(1 if nfail else 0)


if __name__ == "__main__":
    main()
