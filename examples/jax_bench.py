"""Jitted collectives of lpmpi.jax against mpi4jax's, side by side in one launch (rounds
interleaved):

    mpiexec -n 2 python examples/jax_bench.py [--sizes 8,64K,1M,16M,64M] [--rounds 7]
        [--colls allreduce,allgather,bcast] [--json out.json]

Three forms per library and collective: ``call``, a jitted function holding one collective,
called and waited for (``block_until_ready``) call after call (Python dispatch included: the
per-call overhead; its input stays alive, so XLA keeps it apart from the result), ``donated``,
the same with the input donated (``donate_argnums``: each result is the next call's input, as a
training step's gradients are dead after their reduction), and ``loop``, one jitted
``fori_loop`` of 16 collectives, time per collective (what a collective costs inside a jitted
step); lpmpi.jax runs each form also with ``in_place=True`` (allreduce, bcast).  Sizes: the message's bytes
(allgather: the P blocks' bytes, as nccl-tests counts them), float32.  Each round times a batch
of calls of every row in turn; the table gives the median over rounds of the slowest rank's
time per collective, min and max, and the ratios mpi4jax / lpmpi.jax.  mpi4jax rows appear
where mpi4jax is installed (built against the same MPI: docs/api.md, "JAX").
"""
from __future__ import annotations

import argparse
import json
import statistics

import jax
import jax.numpy as jnp
from _batched import time_batched
from mpi4py import MPI

import lpmpi.jax as lj
from lpmpi._units import parse_size
from lpmpi.tables import cpu_model

try:
    import mpi4jax
except ImportError:          # lpmpi.jax rows only
    mpi4jax = None

LOOP = 16


def collective(lib, coll: str, **kw):
    """x -> the collective of lib on x (same shape out, so that a loop can carry it)."""
    if coll == "allreduce":
        return lambda x: lib.allreduce(x, MPI.SUM, **kw)
    if coll == "bcast":
        return lambda x: lib.bcast(x, 0, **kw)
    if coll == "allgather":
        return lambda x: lib.allgather(x)[0]
    raise ValueError(coll)


def rows_for(coll: str, nbytes: int, P: int) -> dict:
    n = max(1, nbytes // 4 // (P if coll == "allgather" else 1))
    x = jnp.ones(n, jnp.float32)
    libs = {"lpmpi.jax": collective(lj, coll)}
    if coll != "allgather":
        libs["lpmpi.jax in_place"] = collective(lj, coll, in_place=True)
    if mpi4jax is not None:
        libs["mpi4jax"] = collective(mpi4jax, coll)
    rows = {}
    for name, one in libs.items():
        call = jax.jit(one)
        chain = jax.jit(one, donate_argnums=0)
        loop = jax.jit(lambda v, one=one: jax.lax.fori_loop(0, LOOP, lambda i, a: one(a), v))
        held = [jnp.ones(n, jnp.float32)]

        def chained(f=chain, held=held):
            held[0] = f(held[0])
            held[0].block_until_ready()

        rows[f"{coll} {name} call"] = (lambda f=call: f(x).block_until_ready(), 1)
        rows[f"{coll} {name} donated"] = (chained, 1)
        rows[f"{coll} {name} loop"] = (lambda f=loop: f(x).block_until_ready(), LOOP)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,64K,1M,16M,64M")
    ap.add_argument("--colls", default="allreduce,allgather,bcast")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.05, help="seconds per row per round")
    ap.add_argument("--json", default=None, help="write the medians here (rank 0)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    P, r = comm.Get_size(), comm.Get_rank()
    if r == 0:
        m4j = f"mpi4jax {mpi4jax.__version__}" if mpi4jax is not None else "no mpi4jax"
        print(f"# jitted collectives, P = {P}, jax {jax.__version__}, {m4j}, "
              f"{MPI.Get_library_version().splitlines()[0].strip()}")
        print(f"# CPU: {cpu_model()}; median over {a.rounds} interleaved rounds of the slowest "
              f"rank, us per collective", flush=True)
    out = []
    for coll in a.colls.split(","):
        for nb in (parse_size(s) for s in a.sizes.split(",")):
            rows = rows_for(coll, nb, P)
            times = time_batched(comm, rows, a.rounds, a.min_time)
            if r == 0:
                med = {k: statistics.median(v) for k, v in times.items()}
                print(f"\n# {coll} {nb} bytes")
                print(f"{'row':34s} {'median_us':>10s} {'min_us':>9s} {'max_us':>9s}")
                for k, v in times.items():
                    print(f"{k:34s} {med[k] * 1e6:10.2f} {min(v) * 1e6:9.2f} {max(v) * 1e6:9.2f}")
                    out.append({"coll": coll, "bytes": nb, "row": k, "median": med[k],
                                "min": min(v), "max": max(v)})
                if mpi4jax is not None:
                    for form in ("call", "donated", "loop"):
                        m4 = med[f"{coll} mpi4jax {form}"]
                        line = f"  {form}: mpi4jax / lpmpi.jax {m4 / med[f'{coll} lpmpi.jax {form}']:.2f}x"
                        if f"{coll} lpmpi.jax in_place {form}" in med:
                            line += f", / in_place {m4 / med[f'{coll} lpmpi.jax in_place {form}']:.2f}x"
                        print(line, flush=True)
    if r == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"P": P, "cpu": cpu_model(), "jax": jax.__version__, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
