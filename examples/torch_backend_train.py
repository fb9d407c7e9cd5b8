"""Train a small transformer with DDP or FSDP2 on torch.distributed backend "lpmpi" (or "gloo",
the same script, for comparison), CPU only.  Run under MPI's launcher:

    mpiexec -n 2 python examples/torch_backend_train.py --backend lpmpi --mode fsdp2

Switching a script to lpmpi takes two lines: ``import lpmpi.torch`` (registers the backend)
and ``dist.init_process_group("lpmpi")``; no MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE needed
(they come from MPI where unset; gloo gets them the same way here).

--steps N steps of Adam (or --optim sgd) with gradient clipping; --save DIR writes a distributed checkpoint
(torch.distributed.checkpoint) after them; --load DIR starts from one.  --json PATH writes the
losses, the step times and a digest of the parameters (rank 0); --params PATH the parameters.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

import lpmpi.torch  # noqa: F401  (registers backend "lpmpi")


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, tok: torch.Tensor) -> torch.Tensor:
        x = self.emb(tok)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def _no_comm_hook(state, bucket):
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def digest(model: nn.Module) -> tuple[str, list[float]]:
    """sha256 of the full parameters (FSDP2's sharded ones gathered first), and each
    parameter's sum (float64), for comparisons within a tolerance."""
    h, sums = hashlib.sha256(), []
    for _, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        t = (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().contiguous()
        h.update(t.numpy().tobytes())
        sums.append(float(t.double().sum()))
    return h.hexdigest(), sums


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="lpmpi")
    ap.add_argument("--mode", choices=("ddp", "fsdp2"), default="ddp")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--save", default=None)
    ap.add_argument("--load", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--params", default=None, help="save the final parameters here (rank 0)")
    ap.add_argument("--optim", choices=("adam", "sgd"), default="adam",
                    help="sgd: a step whose optimizer costs little next to its communication")
    ap.add_argument("--no-comm", action="store_true",
                    help="DDP: skip the gradient allreduce (a hook that returns the bucket as it "
                         "is): the step's time without its communication, to measure its share")
    a = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, P = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyLM(a.vocab, a.dim, a.layers, 4)
    if a.mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
        if a.no_comm:       # the step without its gradient communication (wrong training!)
            model.register_comm_hook(None, _no_comm_hook)
    else:
        from torch.distributed.fsdp import fully_shard
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
    opt = (torch.optim.Adam(model.parameters(), lr=1e-3) if a.optim == "adam"
           else torch.optim.SGD(model.parameters(), lr=1e-2))
    start, msd, osd, state = 0, None, None, None
    if a.load:
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd, "step": torch.tensor(0)}
        dcp.load(state, checkpoint_id=a.load)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        start = int(state["step"])
    losses, times = [], []
    for step in range(start, start + a.steps):
        g = torch.Generator().manual_seed(1000 * step + rank)     # each rank its own batch
        tok = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
        t0 = time.perf_counter()
        logits = model(tok[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, a.vocab), tok[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt, op=dist.ReduceOp.AVG)
        times.append(time.perf_counter() - t0)
        losses.append(float(lt))
    if a.save:
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd, "step": torch.tensor(start + a.steps)},
                 checkpoint_id=a.save)
    if a.params:             # every parameter, flat, float32 (rank 0)
        full = [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().reshape(-1)
                for _, p in sorted(model.named_parameters(), key=lambda kv: kv[0])]
        if rank == 0:
            torch.save(torch.cat(full), a.params)
    d, sums = digest(model)
    ds = [None] * P
    dist.all_gather_object(ds, d)
    if rank == 0:
        out = {"backend": a.backend, "mode": a.mode, "P": P, "losses": losses,
               "step_s": times, "digest": d, "param_sums": sums,
               "same_on_every_rank": len(set(ds)) == 1}
        print(json.dumps(out), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f)
    # the model and optimizer go while the group still works (gloo's, freed after a DCP save
    # with the group destroyed, hung half the time at P = 2), then every rank leaves together
    del model, opt, msd, osd, state
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
