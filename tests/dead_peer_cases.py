"""One launch of the dead-peer matrix (tests/test_dead_peer.py, issue 48), run under
``mpiexec -disable-auto-cleanup`` (MPICH's launcher keeps the survivors and sends them its
failure notice, SIGUSR1).

    dead_peer_cases.py WHERE DEATH OUTDIR

WHERE: where the survivors are when the victim (the last rank) dies:
  outside      in Python (time.sleep), then a collective: they keep running, then raise
  blocking     inside a blocking lpmpi collective (ring over the node-local transport of
               LPMPI_NODE_TRANSPORT, or over MPI)
  native       inside MPI's own collective through lpmpi (algorithm="native")
  nonblocking  waiting a nonblocking lpmpi collective (iallreduce(...).wait())
DEATH: exit (os._exit: gone without MPI_Finalize) or kill (SIGKILL).

Each survivor writes OUTDIR/rank<r>.txt, one line per event ("alive ...", "RAISED <seconds>
<message>", "NOT RAISED"), and never prints: MPICH's launcher kills every process of a node
once it reaps one that died by a signal, and it does so when a survivor's output wakes it
(docs/debugging.md "A rank that dies").  The survivors leave with os._exit (no MPI_Finalize,
which would wait for the dead rank) once every survivor has written its result: a survivor
that left at once would be taken by the others for a dead peer too."""
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

where, death, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
w = MPI.COMM_WORLD
P, me = w.Get_size(), w.Get_rank()
victim = P - 1
alg = "native" if where == "native" else "ring"
x = np.ones((1 << 20) // 4, dtype=np.float32)


def note(line):
    with open(os.path.join(outdir, f"rank{me}.txt"), "a") as f:
        f.write(line + "\n")


for _ in range(3):
    assert lpmpi.allreduce(x, algorithm=alg)[0] == P
note(f"ready transport={lpmpi._core.ring_transport(w, x.nbytes)} pid={os.getpid()}")
w.Barrier()
if me == victim:
    time.sleep(0.5)                  # the survivors are inside the collective by then
    if death == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(9)
t = time.monotonic()
try:
    if where == "outside":
        time.sleep(1.5)
        note(f"alive {time.monotonic() - t:.2f}")
        lpmpi.allreduce(x, algorithm="ring")
    elif where == "nonblocking":
        lpmpi.iallreduce(x, algorithm=alg).wait()
    else:
        lpmpi.allreduce(x, algorithm=alg)
    note("NOT RAISED")
except lpmpi.LPError as e:
    note(f"RAISED {time.monotonic() - t:.2f} {e}".replace("\n", " "))
# the other survivors may still look at this rank's process: leave when every survivor is done
t = time.monotonic()
while time.monotonic() - t < 15:
    done = 0
    for r in range(P - 1):
        try:
            with open(os.path.join(outdir, f"rank{r}.txt")) as f:
                done += "RAISED" in f.read()         # (NOT RAISED too)
        except OSError:
            pass
    if done == P - 1:
        break
    time.sleep(0.05)
os._exit(0)
