"""Data-parallel BSP-SGD on lpmpi: a small multilayer network in numpy, trained on the digits
data set that ships with scikit-learn (nothing is downloaded).

Run it under mpiexec (any P; P = 1 works without mpiexec)::

    mpiexec -n 4 python examples/bsp_sgd.py --algorithm lp --epochs 5 --json sgd.json
    mpiexec -n 2 python examples/bsp_sgd.py --algorithm lp,mst,be --width 2048   # 17 MB gradient

Bulk Synchronous Parallel SGD: every iteration takes one *global* batch of ``--batch`` samples
(the same samples, in the same order, whatever P is); rank r computes the gradient of its own
contiguous share of it; the ranks average their gradients with one
``lpmpi.allreduce(op="avg")`` and all take the same step.  The gradients of all layers are
flattened into one fused buffer (Horovod's tensor fusion); the batch's loss rides in the same
buffer as one extra element, so one allreduce per iteration carries everything.  Each rank
scales its share's gradient by P * share / batch, so the average over ranks is exactly the
gradient of the global batch, even when P does not divide the batch.  The initial parameters
are drawn on rank 0 from ``--seed`` and reach every rank by ``lpmpi.bcast`` (the other ranks
start from zeros, so a broken bcast shows).

Equivalence: with the same ``--seed`` and ``--batch``, P = 2, 3, 4 follow the loss curve of
P = 1 up to float32 rounding (the sums are taken in another order); tests/test_bsp_sgd.py checks
per-iteration losses to a relative 1e-5 over a few iterations, for every algorithm (the
differences seen are about 1e-7, float32 rounding).

Overlap (``--overlap``): as PyTorch DDP does with gradient buckets, the gradient of each layer
is averaged by its own ``lpmpi.iallreduce`` (in place, op "avg"), started as soon as backward
has produced it (the last layer first, with the loss), while backward goes on with the layers
below; all are waited for before the update.  ``--buckets layer`` averages the same per-layer
buckets without overlap (blocking calls after backward), so the two train bitwise alike with
one algorithm and chunk size: the same messages, only the timing differs (the fused buffer of
the default differs from per-layer buckets by float32 rounding where an algorithm's reduction
order depends on an element's place in the message: lp and ring at P >= 3).
``--progress-thread`` starts lpmpi's progress thread, which moves the started allreduces along
while backward computes (without it, only the chunks already posted move until the waits).

Per epoch it prints the training loss (mean over the epoch's batches), the accuracy on the
held-out part of the data set, and the time split: ``compute_s`` (forward and backward
passes and the update, the slowest rank's sum; with --overlap the starts too) and ``comm_s``
(time the rank waited on or ran lpmpi collectives, the slowest rank's sum; the first epoch
includes the parameters' bcast): what overlap hides comes off ``comm_s``.  ``--json PATH``
writes a list with one record per (algorithm, epoch).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi

N_TEST = 297  # held-out samples (the digits set has 1797: 1500 train, 297 test)
DTYPE = np.float32


# ----------------------------------------------------------------------------- data and model


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Digits (8x8 images, 10 classes), scaled to [0, 1], split by a seeded permutation."""
    from sklearn.datasets import load_digits  # bundled with scikit-learn

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(DTYPE)
    perm = np.random.default_rng(seed).permutation(len(y))
    test, train = perm[:N_TEST], perm[N_TEST:]
    return x[train], y[train].astype(np.int64), x[test], y[test].astype(np.int64)


class MLP:
    """``sizes[0] -> ... -> sizes[-1]``, ReLU between layers, softmax cross-entropy.

    All parameters live in one flat float32 array ``self.flat``; the layers are views into it,
    and the gradient is computed straight into one flat array of the same layout (the fused
    buffer that the allreduce averages).
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.shapes: list[tuple[int, ...]] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            self.shapes += [(fan_in, fan_out), (fan_out,)]
        self.offsets = np.cumsum([0] + [int(np.prod(s)) for s in self.shapes]).tolist()
        self.nparams = self.offsets[-1]
        self.flat = np.zeros(self.nparams, DTYPE)

    def views(self, flat: np.ndarray) -> list[np.ndarray]:
        return [
            flat[a:b].reshape(s) for a, b, s in zip(self.offsets[:-1], self.offsets[1:], self.shapes)
        ]

    def init(self, seed: int) -> None:
        """He-normal weights, zero biases, drawn from ``seed`` (same on every rank that calls it)."""
        rng = np.random.default_rng(seed)
        for i, v in enumerate(self.views(self.flat)):
            if i % 2 == 0:
                v[...] = rng.standard_normal(v.shape) * np.sqrt(2.0 / v.shape[0])
            else:
                v[...] = 0

    def logits(self, x: np.ndarray) -> np.ndarray:
        p = self.views(self.flat)
        h = x
        for i in range(0, len(p) - 2, 2):
            h = np.maximum(h @ p[i] + p[i + 1], 0)
        return h @ p[-2] + p[-1]

    def loss_and_grad(self, x: np.ndarray, y: np.ndarray, grad: np.ndarray,
                      layer_done: Any = None) -> float:
        """Write d(sum of losses over the rows of x)/d(params) into ``grad``; return the loss sum.
        ``layer_done(layer, loss_sum)``, if given, is called as soon as a layer's gradient is in
        ``grad`` (the last layer first)."""
        p = self.views(self.flat)
        g = self.views(grad)
        acts = [x]
        h = x
        for i in range(0, len(p) - 2, 2):
            h = np.maximum(h @ p[i] + p[i + 1], 0)
            acts.append(h)
        z = h @ p[-2] + p[-1]
        z = z - z.max(axis=1, keepdims=True)
        ez = np.exp(z)
        s = ez.sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        loss = float(np.sum(np.log(s[:, 0]) - z[rows, y], dtype=np.float64))
        d = ez / s
        d[rows, y] -= 1  # d loss_sum / d z
        for i in range(len(p) - 2, -1, -2):
            a = acts[i // 2]
            np.matmul(a.T, d, out=g[i])
            np.sum(d, axis=0, out=g[i + 1])
            if layer_done is not None:
                layer_done(i // 2, loss)
            if i:
                d = d @ p[i].T
                d *= a > 0
        return loss

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(np.argmax(self.logits(x), axis=1) == y))


# ----------------------------------------------------------------------------- training


def share(batch: int, nprocs: int, rank: int) -> tuple[int, int]:
    """This rank's contiguous share [lo, hi) of a global batch (np.array_split's split)."""
    q, r = divmod(batch, nprocs)
    lo = rank * q + min(rank, r)
    return lo, lo + q + (1 if rank < r else 0)


def train(args: argparse.Namespace, algorithm: str, comm: MPI.Comm, data: tuple) -> list[dict[str, Any]]:
    """One training run with one algorithm; returns its per-epoch records (on every rank)."""
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    xtr, ytr, xte, yte = data
    model = MLP([xtr.shape[1], *([args.width] * args.layers), 10])
    kw = {"algorithm": algorithm, "chunk_bytes": args.chunk_bytes, "comm": comm}
    if rank == 0:
        model.init(args.seed)
    clock = time.perf_counter
    comm.Barrier()
    t0 = clock()
    bcast_alg = algorithm if algorithm in ("auto", *lpmpi.algorithms("bcast")) else "auto"
    lpmpi.bcast(model.flat, root=0, comm=comm, algorithm=bcast_alg, chunk_bytes=args.chunk_bytes)
    bcast_s = clock() - t0

    fused = np.empty(model.nparams + 1, DTYPE)  # all gradients, then the loss
    grad = fused[:-1]
    lo, hi = share(args.batch, nprocs, rank)
    weight = nprocs * (hi - lo) / args.batch  # local mean -> this rank's part of the global mean
    # per-layer buckets of `fused` (layer k's weights and bias; the last layer's with the loss)
    nlayers = len(model.shapes) // 2
    bounds = [(model.offsets[2 * k], model.offsets[2 * k + 2]) for k in range(nlayers)]
    bounds[-1] = (bounds[-1][0], model.nparams + 1)
    buckets = [fused[a:b] for a, b in bounds]
    scale = DTYPE(weight / (hi - lo)) if hi > lo else DTYPE(0)
    requests: list[Any] = []

    def layer_done(k: int, loss_sum: float) -> None:
        """--overlap: layer k's gradient is ready: scale it and start its average."""
        if k == nlayers - 1:
            fused[-1] = loss_sum * (weight / (hi - lo))
        b = buckets[k]
        if k == nlayers - 1:
            b[:-1] *= scale
        else:
            b *= scale
        requests.append(lpmpi.iallreduce(lpmpi.IN_PLACE, b, op="avg", **kw))
    iters = len(ytr) // args.batch
    if args.iterations:
        iters = min(iters, args.iterations)
    records = []
    for epoch in range(args.epochs):
        order = np.random.default_rng([args.seed, epoch]).permutation(len(ytr))
        compute = comm_t = 0.0
        losses = []
        for it in range(iters):
            idx = order[it * args.batch + lo : it * args.batch + hi]
            t0 = clock()
            if args.overlap and hi > lo:       # backward starts each layer's average
                model.loss_and_grad(xtr[idx], ytr[idx], grad, layer_done)
            elif hi > lo:
                loss_sum = model.loss_and_grad(xtr[idx], ytr[idx], grad)
                grad *= scale
                fused[-1] = loss_sum * (weight / (hi - lo))
            else:  # more ranks than samples in a batch: contribute zeros
                fused[...] = 0
                if args.overlap:
                    requests.extend(lpmpi.iallreduce(lpmpi.IN_PLACE, buckets[k], op="avg", **kw)
                                    for k in reversed(range(nlayers)))
            t1 = clock()
            if args.overlap:
                lpmpi.waitall(requests)
                requests.clear()
            elif args.buckets == "layer":
                for k in reversed(range(nlayers)):
                    lpmpi.allreduce(lpmpi.IN_PLACE, buckets[k], op="avg", **kw)
            else:
                lpmpi.allreduce(lpmpi.IN_PLACE, fused, op="avg", **kw)
            t2 = clock()
            model.flat -= DTYPE(args.lr) * grad
            t3 = clock()
            compute += (t1 - t0) + (t3 - t2)
            comm_t += t2 - t1
            losses.append(float(fused[-1]))
        if epoch == 0:
            comm_t += bcast_s
        slowest = np.array([compute, comm_t])
        comm.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)  # outside the timed regions
        compute, comm_t = float(slowest[0]), float(slowest[1])
        acc = model.accuracy(xte, yte)
        records.append(
            {
                "epoch": epoch + 1,
                "algorithm": algorithm,
                "P": nprocs,
                "loss": float(np.mean(losses)),
                "accuracy": acc,
                "compute_s": compute,
                "comm_s": comm_t,
                "iterations": iters,
                "iteration_losses": losses,
                "grad_bytes": int(fused.nbytes),
                "batch": args.batch,
                "width": args.width,
                "chunk_bytes": args.chunk_bytes,
                "seed": args.seed,
                "bcast_s": bcast_s if epoch == 0 else 0.0,
                "param_checksum": float(np.sum(model.flat, dtype=np.float64)),
                "param_digest": hashlib.sha1(model.flat.tobytes()).hexdigest(),
                "overlap": bool(args.overlap),
                "buckets": "layer" if args.overlap else args.buckets,
                "progress_thread": bool(args.progress_thread),
                "measured": True,
            }
        )
        if rank == 0:
            print(
                f"{algorithm:>6}  epoch {epoch + 1:3d}  loss {records[-1]['loss']:.6f}  "
                f"accuracy {acc:.4f}  compute {compute:8.3f} s  comm {comm_t:8.3f} s  "
                f"({100 * comm_t / max(compute + comm_t, 1e-12):4.1f}% comm)"
                + ("  [overlap]" if args.overlap else ""),
                flush=True,
            )
    return records


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--algorithm",
        default="lp",
        help="lpmpi algorithm for allreduce and bcast (auto, lp, mst, be, ring, native), a "
        "comma-separated list, or 'all'; a list trains once per algorithm (ring: allreduce "
        "only, its bcast is auto)",
    )
    p.add_argument("--chunk-bytes", type=int, default=None, help="chunk_bytes (default: lpmpi's choice)")
    p.add_argument("--width", type=int, default=64, help="units per hidden layer (default 64)")
    p.add_argument("--layers", type=int, default=2, help="hidden layers (default 2)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--iterations", type=int, default=0, help="iterations per epoch (default: all)")
    p.add_argument("--batch", type=int, default=120, help="global batch size (default 120)")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="write the per-epoch records here (rank 0)")
    p.add_argument("--overlap", action="store_true",
                   help="average each layer's gradient with iallreduce as soon as backward produced it, "
                   "wait before the update (per-layer buckets)")
    p.add_argument("--buckets", choices=["fused", "layer"], default="fused",
                   help="without --overlap: one fused allreduce (default) or one per layer, blocking, "
                   "after backward (--overlap's messages without the overlap)")
    p.add_argument("--progress-thread", action="store_true",
                   help="start lpmpi's progress thread (advances the started allreduces during backward)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    comm = MPI.COMM_WORLD
    if args.algorithm == "all":
        algs = ["lp", "mst", "be", "ring", "native"]
    else:
        algs = [a.strip() for a in args.algorithm.split(",") if a.strip()]
    for a in algs:
        if a != "auto" and a not in lpmpi.algorithms("allreduce"):
            raise SystemExit(f"unknown algorithm {a!r} (known: {', '.join(lpmpi.algorithms('allreduce'))})")
    data = load_data(args.seed)
    if args.progress_thread:
        lpmpi.progress_thread(True)
    records: list[dict[str, Any]] = []
    if comm.Get_rank() == 0:
        nparams = sum(
            a * b + b for a, b in zip([64, *[args.width] * args.layers], [*[args.width] * args.layers, 10])
        )
        print(
            f"# BSP-SGD on digits: P={comm.Get_size()} global batch {args.batch}, width {args.width}, "
            f"{nparams} parameters ({4 * (nparams + 1) / 2**20:.2f} MiB fused gradient), seed {args.seed}",
            flush=True,
        )
    for a in algs:
        records += train(args, a, comm, data)
    if args.json and comm.Get_rank() == 0:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(records, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
