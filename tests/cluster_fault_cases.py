"""Collectives in the box while a fault is injected from outside (tests/test_cluster_faults.py).

    python -m lpmpi.cluster run --layout 1,1,1 -- python cluster_fault_cases.py SECONDS [NBYTES]

Every rank runs allreduce (lp, ring, auto in turn) and bcast (lp) of NBYTES (default 4 MiB) on
data whose exact result it knows, for SECONDS, checking every result bitwise; prints READY after
the first round (the driver then injects its fault), a line per round, and SUMMARY with the
rounds and failures; an LPError (LPMPI_TIMEOUT, a lost peer) is printed as ERROR rank=... with
its message, then the rank exits 3.
"""
import os
import socket
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

comm = MPI.COMM_WORLD
rank, P = comm.Get_rank(), comm.Get_size()
seconds = float(sys.argv[1])
nbytes = int(sys.argv[2]) if len(sys.argv) > 2 else 4 << 20
n = nbytes // 4
host = socket.gethostname()
# small integers: every order of the sums gives the same float32 bits
x = ((np.arange(n) * 7 + rank * 3) % 11).astype(np.float32)
want = sum(((np.arange(n) * 7 + r * 3) % 11).astype(np.float32) for r in range(P))
b0 = ((np.arange(n) * 5) % 13).astype(np.float32)
rounds = failures = 0
t_end = time.monotonic() + seconds
try:
    while True:
        for alg in ("lp", "ring", "auto"):
            y = lpmpi.allreduce(x, algorithm=alg, comm=comm)
            if not np.array_equal(y, want):
                failures += 1
                print(f"FAIL rank={rank} allreduce {alg} round {rounds}", flush=True)
        b = b0.copy() if rank == 0 else np.zeros(n, np.float32)
        lpmpi.bcast(b, root=0, comm=comm, algorithm="lp")
        if not np.array_equal(b, b0):
            failures += 1
            print(f"FAIL rank={rank} bcast lp round {rounds}", flush=True)
        rounds += 1
        if rounds == 1 and rank == 0:
            print("READY", flush=True)
        if rank == 0:
            print(f"ROUND {rounds} t={time.monotonic():.3f}", flush=True)
        # every rank stops after the same round: rank 0's clock decides (lpmpi's bcast: under the
        # watchdog, as MPI's own collectives are not)
        stop = np.array([rank == 0 and time.monotonic() >= t_end], np.int32)
        lpmpi.bcast(stop, root=0, comm=comm)
        if stop[0]:
            break
except lpmpi.LPError as exc:
    print(f"ERROR rank={rank} host={host} pid={os.getpid()} after {rounds} rounds: {exc}", flush=True)
    sys.stdout.flush()
    os._exit(3)
print(f"SUMMARY suite=cluster-faults rank={rank} host={host} rounds={rounds} failures={failures}", flush=True)
