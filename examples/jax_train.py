"""Data-parallel training of a small MLP with JAX: each rank takes its share of the global batch,
and the gradients are averaged across ranks inside the jitted step by lpmpi.jax (or, for
comparison, by mpi4jax: the same script, ``--backend mpi4jax``).

    mpiexec -n 2 python examples/jax_train.py [--backend lpmpi|mpi4jax] [--steps 20]
        [--hidden 256] [--layers 3] [--batch 64] [--json out.json]

The data are synthetic and seeded; the global batch is the same whatever P is, so a run at
P = 2 follows the run of one process on the whole batch (tests/test_jax.py checks it).  Step
times (median of the steps after the first two, the slowest rank's) are printed, and written
with the losses to ``--json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI


def init(key, sizes):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, k = jax.random.split(key)
        params.append((jax.random.normal(k, (m, n), jnp.float32) / np.sqrt(m),
                       jnp.zeros(n, jnp.float32)))
    return params


def forward(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("lpmpi", "mpi4jax"), default="lpmpi")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64, help="global batch (split across ranks)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    world = MPI.COMM_WORLD
    P, rank = world.Get_size(), world.Get_rank()
    if a.batch % P:
        raise SystemExit(f"--batch {a.batch} must be a multiple of the {P} ranks")
    if a.backend == "lpmpi":
        import lpmpi.jax as lj

        def mean(g):        # the gradient is dead after this: reduce it in its own buffer
            return lj.allreduce(g, "sum", in_place=True) / P
    else:
        import mpi4jax

        def mean(g):
            return mpi4jax.allreduce(g, op=MPI.SUM) / P

    sizes = [a.features] + [a.hidden] * (a.layers - 1) + [1]
    params = init(jax.random.PRNGKey(0), sizes)
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((a.steps, a.batch, a.features)).astype(np.float32)
    ys = np.sin(xs.sum(axis=2, keepdims=True)).astype(np.float32)
    share = a.batch // P
    mine = slice(rank * share, (rank + 1) * share)

    @jax.jit
    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = jax.tree_util.tree_map(mean, grads)
        params = jax.tree_util.tree_map(lambda p, g: p - a.lr * g, params, grads)
        return params, mean(loss)

    nparams = sum(w.size + b.size for w, b in params)
    if rank == 0:
        print(f"# {a.backend}: MLP {sizes} ({nparams} parameters), P = {P}, global batch "
              f"{a.batch}, jax {jax.__version__}", flush=True)
    losses, times = [], []
    for i in range(a.steps):
        world.Barrier()
        t0 = time.perf_counter()
        params, loss = step(params, jnp.asarray(xs[i, mine]), jnp.asarray(ys[i, mine]))
        loss = float(loss)                         # waits for the step
        times.append(world.allreduce(time.perf_counter() - t0, op=MPI.MAX))
        losses.append(loss)
    flat = np.concatenate([np.asarray(v).ravel() for wb in params for v in wb])
    same = all(np.array_equal(flat, other) for other in world.allgather(flat))
    med = statistics.median(times[2:]) if len(times) > 2 else times[-1]
    if rank == 0:
        print(f"losses: {losses[0]:.6f} -> {losses[-1]:.6f}; step {med * 1e3:.3f} ms (median of "
              f"steps 3..{a.steps}); parameters identical on every rank: {same}", flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"backend": a.backend, "P": P, "params": int(nparams), "losses": losses,
                           "step_s": med, "times": times, "same_on_every_rank": same}, f)


if __name__ == "__main__":
    main()
