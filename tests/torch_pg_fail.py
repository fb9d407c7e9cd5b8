"""Failure paths of backend "lpmpi" (tests/test_torch_backend.py).

    mpiexec -n 2 python tests/torch_pg_fail.py raise   # rank 1 raises before an all_reduce
    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. python tests/torch_pg_fail.py torchrun
"""
import datetime
import sys

import torch
import torch.distributed as dist

import lpmpi.torch  # noqa: F401

mode = sys.argv[1]
if mode == "raise":
    for v in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        __import__("os").environ.pop(v, None)
    dist.init_process_group("lpmpi", timeout=datetime.timedelta(seconds=3))
    if dist.get_rank() == 1:
        raise SystemExit("rank 1 fails before the all_reduce (on purpose)")
    try:
        dist.all_reduce(torch.ones(4))
    except Exception as e:  # noqa: BLE001
        print(f"rank 0 raised {type(e).__name__}: {e}", flush=True)
        sys.exit(3)
    print("rank 0: all_reduce returned", flush=True)
elif mode == "torchrun":
    try:
        dist.init_process_group("lpmpi")
    except RuntimeError as e:
        print(f"refused: {e}", flush=True)
        sys.exit(4)
    print("init_process_group returned", flush=True)
