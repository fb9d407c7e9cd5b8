"""Per-call cost of torch.distributed on backend "lpmpi" against backend "gloo" and against
calling lpmpi directly, side by side in one launch (rounds interleaved):

    mpiexec -n 2 python examples/torch_backend_bench.py [--sizes 8,64K,1M] [--rounds 7]

Rows: ``dist.all_reduce``, ``dist.all_gather_into_tensor`` and ``dist.reduce_scatter_tensor``
(sizes: the P blocks' bytes for the last two, as nccl-tests counts them) on the default group
(backend "lpmpi") and on a gloo group of the same ranks, and ``lpmpi.allreduce`` /
``lpmpi.allgather`` / ``lpmpi.reduce_scatter`` on the same tensors.  Each round times a batch
of calls of every row in turn; the table gives the median over rounds of the time per call
(the slowest rank's), and the ratios.  float32.
"""
from __future__ import annotations

import argparse
import os
import statistics

import torch
import torch.distributed as dist
from _batched import time_batched
from mpi4py import MPI

import lpmpi
import lpmpi.torch
from lpmpi._units import parse_size
from lpmpi.tables import cpu_model


def make_rows(n: int, P: int, gloo) -> dict:
    """The timed calls at n float32 elements (allgather / reduce_scatter: blocks of n / P)."""
    x, blk = torch.ones(n), max(1, n // P)
    xin, big = torch.ones(blk), torch.empty(blk * P)
    rs_in, rs_out = torch.ones(blk * P), torch.empty(blk)
    return {
        "all_reduce lpmpi": lambda: dist.all_reduce(x),
        "all_reduce gloo": lambda: dist.all_reduce(x, group=gloo),
        "lpmpi.allreduce": lambda: lpmpi.allreduce(lpmpi.IN_PLACE, x),
        "all_gather_into_tensor lpmpi": lambda: dist.all_gather_into_tensor(big, xin),
        "all_gather_into_tensor gloo": lambda: dist.all_gather_into_tensor(big, xin, group=gloo),
        "lpmpi.allgather": lambda: lpmpi.allgather(xin, big.view(P, -1)),
        "reduce_scatter_tensor lpmpi": lambda: dist.reduce_scatter_tensor(rs_out, rs_in),
        "reduce_scatter_tensor gloo": lambda: dist.reduce_scatter_tensor(rs_out, rs_in, group=gloo),
        "lpmpi.reduce_scatter": lambda: lpmpi.reduce_scatter(rs_in.view(P, -1), rs_out),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,64K,1M,16M")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.05, help="seconds per row per round")
    a = ap.parse_args()
    for v in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        os.environ.pop(v, None)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("lpmpi")
    gloo = dist.new_group(backend="gloo")
    comm = MPI.COMM_WORLD
    P, r = dist.get_world_size(), dist.get_rank()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    if r == 0:
        print(f"# torch.distributed per-call time, P = {P}, torch {torch.__version__}, "
              f"{MPI.Get_library_version().splitlines()[0].strip()}")
        print(f"# CPU: {cpu_model()}; median over {a.rounds} interleaved rounds of the slowest rank")
    for nb in sizes:
        n = max(1, nb // 4)
        rows = make_rows(n, P, gloo)
        times = time_batched(comm, {k: (fn, 1) for k, fn in rows.items()}, a.rounds, a.min_time)
        if r == 0:
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"\n# {nb} bytes")
            print(f"{'call':32s} {'median_us':>10s} {'min_us':>9s} {'max_us':>9s}")
            for k, v in times.items():
                print(f"{k:32s} {med[k] * 1e6:10.2f} {min(v) * 1e6:9.2f} {max(v) * 1e6:9.2f}")
            for coll, direct in (("all_reduce", "lpmpi.allreduce"),
                                 ("all_gather_into_tensor", "lpmpi.allgather"),
                                 ("reduce_scatter_tensor", "lpmpi.reduce_scatter")):
                lp, gl, di = med[f"{coll} lpmpi"], med[f"{coll} gloo"], med[direct]
                print(f"  {coll}: backend lpmpi / direct lpmpi {lp / di:.2f}x, "
                      f"gloo / backend lpmpi {gl / lp:.2f}x")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
