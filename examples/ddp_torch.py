"""PyTorch DistributedDataParallel on lpmpi: a small convolutional network trained on a
synthetic data set of 8x8 images in 10 classes (each class a fixed random pattern plus noise,
made with numpy from a fixed seed: the same on every rank and in every run; nothing is
downloaded, and nothing beyond torch, numpy and mpi4py is needed).

    mpiexec -n 2 python examples/ddp_torch.py --hook lpmpi --algorithm auto --width 2048
    mpiexec -n 2 python examples/ddp_torch.py --hook gloo --width 2048      # the same on gloo

DDP runs on a gloo process group set up from the MPI ranks (``lpmpi.torch.init_process_group``);
``--hook lpmpi`` registers ``lpmpi.torch.allreduce_hook``, which averages every gradient
bucket with ``lpmpi.iallreduce`` while backward goes on; ``--hook gloo`` keeps DDP's default
(gloo's allreduce).  ``--width`` sets the hidden layers (``--width 2048`` gives 24 MiB of
gradients).  Every rank trains on its own share of each global batch of
``--batch`` samples (the same samples whatever P is), so the averaged gradient is the global
batch's.  It prints the loss and the held-out accuracy every ``--log`` steps and the median
step time; at the end it checks that the parameters are bitwise identical on every rank, and
``--save PATH`` writes them (rank 0, numpy .npz) for comparing runs.
"""
from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import lpmpi
import lpmpi.torch


def net(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4 * 4, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


def synthetic_digits(n: int = 1797, classes: int = 10, seed: int = 2017) -> tuple[np.ndarray, np.ndarray]:
    """``n`` 8x8 images in [0, 1] and their labels: each class a fixed random pattern of pixels,
    each image its class's pattern plus Gaussian noise (sigma 0.3), clipped to [0, 1] (the
    defaults reach about 85% held-out accuracy in 60 steps at P = 2)."""
    rng = np.random.default_rng(seed)
    patterns = (rng.random((classes, 8, 8)) < 0.35).astype(np.float64)
    labels = rng.integers(0, classes, n)
    images = np.clip(patterns[labels] + rng.normal(0.0, 0.3, (n, 8, 8)), 0.0, 1.0)
    return images, labels


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hook", choices=["lpmpi", "gloo"], default="lpmpi")
    p.add_argument("--algorithm", default="auto", help="lpmpi's algorithm (--hook lpmpi)")
    p.add_argument("--chunk-bytes", default=None, help="lpmpi's chunk_bytes (--hook lpmpi)")
    p.add_argument("--width", type=int, default=256, help="hidden units (default 256)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                   help="parameters and gradients (default float32)")
    p.add_argument("--acc-dtype", choices=["float32"], default=None,
                   help="--hook lpmpi: sum 16-bit gradients in float32, round once")
    p.add_argument("--compression", choices=["bf16", "int8", "int4"], default=None,
                   help="lpmpi.torch.compress_hook: gradients compressed on the wire (any --hook's group)")
    p.add_argument("--error-feedback", action="store_true",
                   help="--compression: keep each bucket's encoding loss for its next step")
    p.add_argument("--fp16-hook", action="store_true",
                   help="--hook gloo: torch's fp16_compress_hook (the comparison of docs/compression.md)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=64, help="global batch (default 64)")
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", type=int, default=20, help="print every this many steps")
    p.add_argument("--save", metavar="PATH", help="write the final parameters here (rank 0)")
    args = p.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)                    # one core per rank: no oversubscription
    lpmpi.torch.init_process_group(comm)

    images, labels = synthetic_digits()
    dtype = getattr(torch, args.dtype)
    X = torch.tensor(images, dtype=dtype).unsqueeze(1)
    Y = torch.tensor(labels, dtype=torch.int64)
    Xtr, Ytr, Xte, Yte = X[:1500], Y[:1500], X[1500:], Y[1500:]

    torch.manual_seed(args.seed)                # the same initial model everywhere
    model = DDP(net(args.width).to(dtype))
    if args.compression:
        model.register_comm_hook(lpmpi.torch.CompressState(args.compression, args.error_feedback, comm),
                                 lpmpi.torch.compress_hook)
    elif args.fp16_hook:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "lpmpi":
        chunk = int(args.chunk_bytes) if args.chunk_bytes else None
        model.register_comm_hook(lpmpi.torch.HookState(comm, algorithm=args.algorithm,
                                                       chunk_bytes=chunk, acc_dtype=args.acc_dtype),
                                 lpmpi.torch.allreduce_hook)
    nparams = sum(q.numel() for q in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    lossf = nn.CrossEntropyLoss(reduction="sum")
    gen = torch.Generator().manual_seed(args.seed + 1)
    if rank == 0:
        print(f"DDP P={size} hook={args.hook}"
              + (f" algorithm={args.algorithm}" if args.hook == "lpmpi" else "")
              + (f" compression={args.compression}{'+ef' if args.error_feedback else ''}" if args.compression else "")
              + (" fp16_compress_hook" if args.fp16_hook else "")
              + f" {args.dtype} params={nparams}"
              + f" ({nparams * X.element_size() / 2**20:.1f} MiB of gradients)", flush=True)
    times, losses = [], []
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(Xtr), (args.batch,), generator=gen)
        lo, hi = rank * args.batch // size, (rank + 1) * args.batch // size
        xb, yb = Xtr[idx[lo:hi]], Ytr[idx[lo:hi]]
        comm.Barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        # DDP averages over ranks; the sum over this share * P / batch makes that average the
        # global batch's mean gradient whatever the shares' sizes
        loss = lossf(model(xb), yb) * (size / args.batch)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(comm.allreduce(float(loss.detach()) / size))
        if step % args.log == 0 or step == args.steps:
            gl = losses[-1]
            with torch.no_grad():
                acc = (model.module(Xte).argmax(1) == Yte).float().mean().item()
            if rank == 0:
                print(f"step {step:4d}  loss {gl:.6f}  accuracy {acc:.4f}  "
                      f"step time {statistics.median(times[-args.log:]) * 1e3:.2f} ms",
                      flush=True)
    flat = torch.cat([q.detach().float().reshape(-1) for q in model.parameters()]).numpy()
    digests = comm.allgather(hashlib.blake2b(flat.tobytes(), digest_size=12).hexdigest())
    same = len(set(digests)) == 1
    med = comm.allreduce(statistics.median(times[len(times) // 5:]), op=MPI.MAX)
    if rank == 0:
        print(f"median step time {med * 1e3:.2f} ms (slowest rank; first 20% of steps left out)")
        print("parameters identical on every rank" if same else
              f"PARAMETERS DIFFER ACROSS RANKS: {digests}", flush=True)
        if args.save:
            np.savez(args.save, params=flat, step_time_s=med, losses=np.array(losses))
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
