#!/usr/bin/env python
"""The online tuner (LPMPI_AUTOTUNE=1, src/tune/autotune.c) under mpiexec: run with LPMPI_AUTOTUNE=1
and LPMPI_CHECK=1 (every call's whole decision is compared between the ranks by the engine
itself, so a rank that chose differently raises MismatchError).

    LPMPI_AUTOTUNE=1 LPMPI_CHECK=1 mpiexec -n P python tests/autotune_cases.py SCENARIO [--out F]

Scenarios (each prints ``FAIL rank=R case=...`` lines and a ``SUMMARY`` line on rank 0):

- ``noise``: blocking allreduce / reduce_scatter / bcast / alltoall at several sizes, rank 1
  sleeping a random 0-300 us before some calls (noise on one rank only); every result checked
  against numpy; after the run every rank's tuner state (candidates, medians, choice, counters)
  compared with rank 0's; every key first settled within 64 calls.
- ``forms``: after settling, nonblocking and persistent calls of the same keys (they take the
  settled choice) give correct results; a persistent request made before the key settled runs
  the settled choice at its later starts (``Request._choice``), with correct results.
- ``nonblocking``: a program that makes only nonblocking calls (allreduce and allgather, two
  sizes each, up to 8 requests in flight, waited in start order or reversed, noise on rank 1):
  its keys explore and settle from those calls (each timed from its start to its end), every
  result right, every rank's tuner state alike; a burst of more requests in flight than a
  window holds (times not ended when the window is agreed) still settles, results right.
- ``asym``: the ranks wait in different orders (rank 0 starts a and b, then waits for both;
  the others start a, wait for it, start b): the agreements at b's start (the tuner's, and
  LPMPI_CHECK's) advance the requests in flight while they wait, so nobody hangs (both hung
  before, and LPMPI_CHECK's blocking agreement never matched a peer's nonblocking one).
- ``drift``: a settled key whose calls become much slower (rank 1 sleeps 3 ms before each call)
  re-explores; then faster again, re-explores again.
- ``learned``: --calls blocking allreduce calls at each of --sizes (bytes); prints one
  ``LEARNED`` JSON line on rank 0: the learned rows the tables got (``tables.status().warm``)
  and each key's settle and explore counts and choice; every rank's tuner state compared.
- ``save``: the report as a tuning table (``lpmpi.autotune_report()``), written to --out by rank
  0 (LPMPI_AUTOTUNE_FILE does it at exit as well).
"""
# ruff: noqa: BLE001
from __future__ import annotations

import argparse
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()
FAILS = []


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fail(case, msg):
    FAILS.append(case)
    say(f"FAIL rank={RANK} case={case}: {msg}")


try:
    import lpmpi
    from lpmpi import _core, autotune, tables
except Exception:
    say(f"FAIL rank={RANK} case=import lpmpi: {traceback.format_exc()}")
    sys.exit(2)

SIZES = (8, 4096, 65536, 1 << 20)


def noisy(rng, p):
    if RANK == 1 and rng.random() < p:
        time.sleep(rng.random() * 300e-6)


def calls(comm, rng, n, noise):
    """n blocking calls of each collective and size, interleaved as a training loop makes them."""
    P = comm.Get_size()
    for i in range(n):
        for nbytes in SIZES:
            count = max(P, nbytes // 4)
            x = (np.arange(count, dtype=np.float32) % 7) + RANK + i
            noisy(rng, noise)
            case = f"allreduce n={nbytes} i={i}"
            try:
                y = lpmpi.allreduce(x, comm=comm)
                want = sum((np.arange(count, dtype=np.float32) % 7) + r + i for r in range(P))
                if not np.array_equal(y, want):
                    fail(case, "wrong result")
            except Exception:
                fail(case, traceback.format_exc(limit=3))
            case = f"bcast n={nbytes} i={i}"
            try:
                b = x.copy() if RANK == 0 else np.zeros(count, np.float32)
                lpmpi.bcast(b, root=0, comm=comm)
                want = (np.arange(count, dtype=np.float32) % 7) + 0 + i
                if not np.array_equal(b, want):
                    fail(case, "wrong result")
            except Exception:
                fail(case, traceback.format_exc(limit=3))
            blocks = max(1, count // P)
            case = f"reduce_scatter n={nbytes} i={i}"
            try:
                z = lpmpi.reduce_scatter(x[: blocks * P], comm=comm)
                full = sum((np.arange(blocks * P, dtype=np.float32) % 7) + r + i for r in range(P))
                if not np.array_equal(z, full[RANK * blocks:(RANK + 1) * blocks]):
                    fail(case, "wrong result")
            except Exception:
                fail(case, traceback.format_exc(limit=3))
            case = f"alltoall n={nbytes} i={i}"
            try:
                a = np.repeat(np.arange(P, dtype=np.float32) * 10 + RANK + i, blocks)
                t = lpmpi.alltoall(a, comm=comm)
                want = np.repeat(np.arange(P, dtype=np.float32) + RANK * 10 + i, blocks)
                if not np.array_equal(t, want):
                    fail(case, "wrong result")
            except Exception:
                fail(case, traceback.format_exc(limit=3))


def canon(keys):
    return sorted((k["collective"], k["lo"], k["state"], k["choice"], k["calls"], k["settle_calls"],
                   k["settles"], tuple((c["algorithm"], c["chunk_bytes"], c["transport"], c["seconds"],
                                        c["samples"], c["alive"]) for c in k["candidates"]))
                  for k in keys)


def same_everywhere(comm, what):
    mine = canon(autotune.state())
    allst = comm.allgather(mine)
    for r, st in enumerate(allst):
        if st != allst[0]:
            fail(f"{what} state", f"rank {r}'s tuner state differs from rank 0's:\n{st}\n{allst[0]}")
    return mine


def scenario_noise(comm, rng):
    calls(comm, rng, 80, noise=0.5)
    keys = autotune.state()
    if not keys:
        fail("noise", "the tuner saw no key (is LPMPI_AUTOTUNE=1 set?)")
    for k in keys:
        if k["settles"] < 1 or k["settle_calls"] > 64:     # (the noise may make it re-explore since)
            fail("noise settle", f"{k['collective']} {k['nbytes']} B: first settled after "
                 f"{k['settle_calls']} calls ({autotune.describe_key(k)})")
    same_everywhere(comm, "noise")
    return len(keys)


def scenario_forms(comm, rng):
    # persistent requests made before the keys settle follow the settled choice at their starts
    early = {}
    for nbytes in SIZES:
        count = max(comm.Get_size(), nbytes // 4)
        x = np.arange(count, dtype=np.float32) + RANK
        out = np.empty_like(x)
        p = lpmpi.allreduce_init(x, out, comm=comm)
        p.start()
        p.wait()
        early[nbytes] = (p, x, out, p._choice())
    calls(comm, rng, 70, noise=0.0)
    n = 0
    for nbytes, (p, x, out, before) in early.items():
        want = sum(np.arange(x.size, dtype=np.float32) + r for r in range(comm.Get_size()))
        for _ in range(2):
            p.start()
            p.wait()
            if not np.array_equal(out, want):
                fail(f"early allreduce_init n={nbytes}", "wrong result after the key settled")
        k = _core.autotune_key("allreduce", x.nbytes, comm)
        c = k["candidates"][k["choice"]] if k and k["choice"] is not None else None
        now = p._choice()
        if c is None or now != (c["algorithm"], c["chunk_bytes"], c["transport"]):
            fail(f"early allreduce_init n={nbytes}", f"runs {now} (made as {before}), the key settled on {c}")
        p.free()
        n += 2
    for nbytes in SIZES:
        count = max(1, nbytes // 4)
        x = np.arange(count, dtype=np.float32) + RANK
        want = sum(np.arange(count, dtype=np.float32) + r for r in range(comm.Get_size()))
        try:
            reqs = [lpmpi.iallreduce(x, comm=comm) for _ in range(3)]
            for q in reqs:
                if not np.array_equal(q.wait(), want):
                    fail(f"iallreduce n={nbytes}", "wrong result")
            out = np.empty_like(x)
            p = lpmpi.allreduce_init(x, out, comm=comm)
            for _ in range(3):
                p.start()
                p.wait()
                if not np.array_equal(out, want):
                    fail(f"allreduce_init n={nbytes}", "wrong result")
            p.free()
            n += 6
        except Exception:
            fail(f"forms n={nbytes}", traceback.format_exc(limit=3))
    same_everywhere(comm, "forms")
    return n


def scenario_nonblocking(comm, rng):
    P = comm.Get_size()
    sizes = (4096, 65536)
    for i in range(90):
        reqs = []
        for nbytes in sizes:
            for j in range(2):
                x = np.full(nbytes // 4, RANK + i + j, np.float32)
                noisy(rng, 0.3)
                reqs.append((f"iallreduce n={nbytes} i={i} j={j}", lpmpi.iallreduce(x, comm=comm),
                             np.full(x.size, sum(range(P)) + P * (i + j), np.float32)))
                g = np.full(nbytes // 4 // P, RANK * 1000 + i + j, np.float32)
                reqs.append((f"iallgather n={nbytes} i={i} j={j}", lpmpi.iallgather(g, comm=comm),
                             np.repeat(np.arange(P, dtype=np.float32) * 1000 + i + j, g.size)))
        for case, q, want in (reqs if i % 2 else reqs[::-1]):
            try:
                if not np.array_equal(np.ravel(q.wait()), want):
                    fail(case, "wrong result")
            except Exception:
                fail(case, traceback.format_exc(limit=3))
    keys = autotune.state()
    if len(keys) != 2 * len(sizes):
        fail("nonblocking", f"{len(keys)} keys, want {2 * len(sizes)}: {autotune.describe(keys)}")
    for k in keys:
        if k["explore_calls"] < 8 or k["settles"] < 1 or k["settle_calls"] > 2 * 64:
            fail("nonblocking settle", f"{k['collective']} {k['nbytes']} B: {autotune.describe_key(k)}")
    # a burst: 40 requests of one key in flight before any is waited for
    x = np.full(1024, RANK, np.float32)
    for i in range(6):
        reqs = [lpmpi.iallreduce(x + j, comm=comm) for j in range(40)]
        for j, q in enumerate(reqs):
            if not np.array_equal(q.wait(), np.full(x.size, sum(range(P)) + P * j, np.float32)):
                fail(f"burst i={i} j={j}", "wrong result")
    k = _core.autotune_key("allreduce", x.nbytes, comm)
    if k is None or k["settles"] < 1:
        fail("burst", f"not settled after 240 calls in bursts: {k and autotune.describe_key(k)}")
    same_everywhere(comm, "nonblocking")
    return len(keys) + 1


def scenario_asym(comm, rng):
    P = comm.Get_size()
    x = np.ones(65536 // 4, np.float32)
    for i in range(300):
        if RANK == 0:
            a = lpmpi.iallreduce(x, comm=comm)
            b = lpmpi.iallreduce(x * 2, comm=comm)
            ra, rb = a.wait(), b.wait()
        else:
            ra = lpmpi.iallreduce(x, comm=comm).wait()
            rb = lpmpi.iallreduce(x * 2, comm=comm).wait()
        if not (np.all(ra == P) and np.all(rb == 2 * P)):
            fail(f"asym i={i}", "wrong result")
    from lpmpi import _env
    k = _core.autotune_key("allreduce", x.nbytes, comm)
    if _env.settings.autotune and (k is None or k["settles"] < 1):
        fail("asym", f"not settled after 600 calls: {k and autotune.describe_key(k)}")
    same_everywhere(comm, "asym")
    return 1


def slowed_calls(comm, x, n, sleep):
    """n allreduce calls of x; rank 1 sleeps `sleep` seconds before each (a slower machine)."""
    for _ in range(n):
        if RANK == 1 and sleep:
            time.sleep(sleep)
        lpmpi.allreduce(x, comm=comm)


def scenario_drift(comm, rng):
    x = np.ones(4096 // 4, np.float32)
    # an 8 B key left exploring (its size never called again): it must not stop the 4096 B key's
    # windows from judging (a window beside a key that explores now judges nothing)
    for _ in range(3):
        lpmpi.allreduce(np.ones(2, np.float32), comm=comm)

    slowed_calls(comm, x, 80, 0)
    k0 = _core.autotune_key("allreduce", 4096, comm)
    slowed_calls(comm, x, 200, 3e-3)     # long enough to re-explore and settle under the load (first window included)
    k1 = _core.autotune_key("allreduce", 4096, comm)
    slowed_calls(comm, x, 200, 0)
    k2 = _core.autotune_key("allreduce", 4096, comm)
    if k0 is None or k0["state"] != "settled":
        fail("drift", f"not settled after 80 calls: {k0}")
    elif k1["drifts_slower"] < 1:
        fail("drift", f"3 ms slower calls were not seen as a drift: {autotune.describe_key(k1)}")
    elif k2["drifts_faster"] < 1 or k2["state"] != "settled":
        fail("drift", f"the load leaving was not followed: {autotune.describe_key(k2)}")
    same_everywhere(comm, "drift")
    return 3


def scenario_save(comm, rng, out):
    calls(comm, rng, 70, noise=0.0)
    doc = lpmpi.autotune_report()
    if RANK == 0:
        t = tables.parse_table(doc, "autotune report")
        if t.skipped or not t.rows or t.nprocs != SIZE:
            fail("save", f"the report does not read back as a table of P={SIZE}: {t.skipped} {doc}")
        if out:
            autotune.write(out, doc)
    return len(doc["collectives"])


def scenario_learned(comm, sizes, n):
    """A run of a program that makes n calls at each size; what the keys did, on rank 0."""
    import json

    for i in range(n):
        for nbytes in sizes:
            count = max(SIZE, nbytes // 4)
            x = np.full(count, RANK + i, np.float32)
            y = lpmpi.allreduce(x, comm=comm)
            if not np.array_equal(y, np.full(count, sum(range(SIZE)) + SIZE * i, np.float32)):
                fail(f"learned n={nbytes} i={i}", "wrong result")
    same_everywhere(comm, "learned")
    keys = {int(k["nbytes"]): {"settle_calls": k["settle_calls"], "explore_calls": k["explore_calls"],
                               "state": k["state"], "drifts_slower": k["drifts_slower"],
                               "choice": None if k["choice"] is None else
                               [k["candidates"][k["choice"]][f] for f in ("algorithm", "chunk_bytes", "transport")]}
            for k in autotune.state()}
    if RANK == 0:
        say("LEARNED " + json.dumps({"warm": len(tables.status().warm), "path": autotune.path(), "keys": keys}))
    return len(keys)


def scenario_stride(comm, rng):
    """A key settled long enough reads the clock on one call in AT_STRIDE; a drift is still
    followed both ways from there."""
    x = np.ones(2, np.float32)

    slowed_calls(comm, x, 4000, 0)
    # settled and steady, it times one call in several: in a stretch of 1500 calls (up to four
    # stretches: this VM's noise at 8 B, a few microseconds a call, now and then trips the 1.25x
    # drift watch, and a re-exploration times every call for a while)
    for _ in range(4):
        ka = _core.autotune_key("allreduce", 8, comm)
        slowed_calls(comm, x, 1500, 0)
        k0 = _core.autotune_key("allreduce", 8, comm)
        steady = (ka is not None and k0["state"] == "settled" and
                  k0["timed_calls"] - ka["timed_calls"] <= 0.5 * (k0["calls"] - ka["calls"]))
        steady = bool(comm.allreduce(int(steady), op=MPI.MIN))   # (the same loop on every rank)
        if steady:
            break
    slowed_calls(comm, x, 800, 1e-3)     # a steady 8 B key's windows are 256 calls: three of them, one in flight
    k1 = _core.autotune_key("allreduce", 8, comm)
    slowed_calls(comm, x, 3000, 0)
    k2 = _core.autotune_key("allreduce", 8, comm)
    for _ in range(3):        # (settled again: a noise drift may have it re-exploring right now)
        if bool(comm.allreduce(int(k2 is not None and k2["state"] == "settled"), op=MPI.MIN)):
            break
        slowed_calls(comm, x, 500, 0)
        k2 = _core.autotune_key("allreduce", 8, comm)
    if not steady:
        fail("stride", f"not settled and timing one call in several in four stretches of 1500 calls: {k0}")
    elif k1["drifts_slower"] < 1:
        fail("stride", f"1 ms slower calls were not seen as a drift: {autotune.describe_key(k1)}")
    elif k2["drifts_faster"] < 1 or k2["state"] != "settled":
        fail("stride", f"the load leaving was not followed: {autotune.describe_key(k2)}")
    same_everywhere(comm, "stride")
    return 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=["noise", "forms", "nonblocking", "asym", "drift", "stride", "save", "learned"])
    ap.add_argument("--out")
    ap.add_argument("--sizes", default="4096")
    ap.add_argument("--calls", type=int, default=70)
    args = ap.parse_args()
    comm = WORLD.Dup()
    rng = np.random.default_rng(1234 + RANK)
    try:
        if args.scenario == "noise":
            n = scenario_noise(comm, rng)
        elif args.scenario == "forms":
            n = scenario_forms(comm, rng)
        elif args.scenario == "nonblocking":
            n = scenario_nonblocking(comm, rng)
        elif args.scenario == "asym":
            n = scenario_asym(comm, rng)
        elif args.scenario == "drift":
            n = scenario_drift(comm, rng)
        elif args.scenario == "stride":
            n = scenario_stride(comm, rng)
        elif args.scenario == "learned":
            n = scenario_learned(comm, [int(b) for b in args.sizes.split(",")], args.calls)
        else:
            n = scenario_save(comm, rng, args.out)
    except Exception:
        fail(args.scenario, traceback.format_exc())
        n = 0
    bad = WORLD.allreduce(len(FAILS))
    if RANK == 0:
        say(f"SUMMARY scenario={args.scenario} P={SIZE} n={n} failed={bad}")
        for line in autotune.describe():
            say("  " + line)
    comm.Free()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
