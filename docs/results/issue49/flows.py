"""Why the compressed allreduce's halves are chained lanes, not lock-step phases (issue 49):
the same bytes between the nodes of the cluster in a box (1 Gbit/s NICs, MPICH over TCP), sent
to every other node in rounds of one message per peer (each round waited for, as the old
wavefront's phases did), all posted at once, with a window of two rounds in flight, and along
a ring; time over the link bound (the bytes each NIC sends / 125 MB/s), the median of 4
interleaved repetitions (a repetition's time: the slowest rank's).  Under the box's launcher:

    lpmpi-cluster run --layout 1,1,1,1 -- python flows.py PER_PEER_MIB MESSAGE_KIB

Prints one JSON line (rank 0).
"""
import json
import sys
import time

import numpy as np
from mpi4py import MPI

W = MPI.COMM_WORLD
P, ME = W.size, W.rank
PER = int(sys.argv[1]) << 20          # bytes to each peer
C = int(sys.argv[2]) << 10            # bytes a message
K = PER // C
sb = np.ones(PER * P, np.uint8)
rb = np.empty_like(sb)


def pair(j, k, tag):
    to, fr = (ME + j) % P, (ME - j) % P
    return [W.Irecv(rb[fr * PER + k * C:fr * PER + (k + 1) * C], fr, tag),
            W.Isend(sb[to * PER + k * C:to * PER + (k + 1) * C], to, tag)]


def rounds():          # K rounds of one message a peer, each waited for
    for k in range(K):
        MPI.Request.Waitall([q for j in range(1, P) for q in pair(j, k, 1)])


def posted():          # every message posted at once
    MPI.Request.Waitall([q for k in range(K) for j in range(1, P) for q in pair(j, k, 2)])


def window():          # two rounds in flight
    q = []
    for k in range(K):
        q += [x for j in range(1, P) for x in pair(j, k, 3)]
        if len(q) > 4 * (P - 1):
            MPI.Request.Waitall(q[:2 * (P - 1)])
            q = q[2 * (P - 1):]
    MPI.Request.Waitall(q)


def ring():            # the same bytes to the next rank, 4 messages in flight
    q = []
    for k in range(K * (P - 1)):
        q += [W.Irecv(rb[k * C:(k + 1) * C], (ME - 1) % P, 4), W.Isend(sb[k * C:(k + 1) * C], (ME + 1) % P, 4)]
        if len(q) > 8:
            MPI.Request.Waitall(q[:2])
            q = q[2:]
    MPI.Request.Waitall(q)


FNS = {"rounds": rounds, "posted": posted, "window": window, "ring": ring}
times = {k: [] for k in FNS}
for f in FNS.values():
    f()
names = list(FNS)
for r in range(4):
    for k in names[r % len(names):] + names[:r % len(names)]:
        W.Barrier()
        t = time.perf_counter()
        FNS[k]()
        times[k].append(W.allreduce(time.perf_counter() - t, op=MPI.MAX))
if ME == 0:
    bound = PER * (P - 1) / 125e6
    print(json.dumps({"P": P, "per_peer_mib": PER >> 20, "message_kib": C >> 10,
                      "over_bound": {k: round(float(np.median(v)) / bound, 3) for k, v in times.items()},
                      "range": {k: [round(min(v) / bound, 3), round(max(v) / bound, 3)] for k, v in times.items()}}))
