"""torch.distributed.checkpoint.state_dict on backend "lpmpi" (or "gloo", the same script, for
comparison), run under mpiexec by tests/test_torch_backend.py (issue 37).

For a DDP model and an FSDP2 (fully_shard) model, and for each form of StateDictOptions:

  sharded       the default: get_model_state_dict / get_optimizer_state_dict (DTensors under
                FSDP2), dcp.save; load: dcp.load into a fresh model's, set_*_state_dict
  full_offload  full_state_dict=True, cpu_offload=True (rank 0 holds the whole state, the
                others none), dcp.save; load: full_state_dict=True on every rank, dcp.load,
                set_*_state_dict(full_state_dict=True, cpu_offload=True)
  full_bcast    get_*_state_dict(full_state_dict=True, broadcast_from_rank0=True), dcp.save;
                load: rank 0 alone reads the full state (cpu_offload's templates), the others
                pass {}, set_*_state_dict(full_state_dict=True, broadcast_from_rank0=True)
                sends it (torch's _broadcast_tensors: pg._device_types[0])

train 3 steps of Adam with gradient clipping, save, train 3 more ("ref"); then a fresh model
and optimizer (another seed) load the checkpoint and train the same 3 steps ("loaded").
Rank 0 writes the losses, the group's device registration and whether every rank holds the
same parameters to --json, and the full parameters after "ref" and "loaded" to --params.

    mpiexec -n P python tests/torch_state_dict_cases.py --backend lpmpi --dir D --json J --params T
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

for v in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):   # from MPI, not from here
    os.environ.pop(v, None)

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

import lpmpi.torch  # noqa: F401  (registers backend "lpmpi"; env:// from MPI for gloo)

MODES = ("ddp", "fsdp2")
FORMS = ("sharded", "full_offload", "full_bcast")
FIRST, MORE = 3, 3


class Net(nn.Module):
    """Rows of 33 and 5 shard unevenly at P = 2 and 3; 40 at P = 3."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(12, 40)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(40), nn.Linear(40, 33), nn.GELU(), nn.Linear(33, 40))
            for _ in range(2))
        self.out = nn.Linear(40, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        return self.out(h)


def build(mode: str, seed: int):
    torch.manual_seed(seed)
    model = Net()
    if mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def train(model, opt, steps) -> list[float]:
    rank, losses = dist.get_rank(), []
    for step in steps:
        g = torch.Generator().manual_seed(1000 * step + rank)     # each rank its own batch
        x, y = torch.randn(8, 12, generator=g), torch.randn(8, 5, generator=g)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt, op=dist.ReduceOp.AVG)
        losses.append(float(lt))
    return losses


def full_params(model) -> torch.Tensor:
    return torch.cat([(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().reshape(-1)
                      for _, p in sorted(model.named_parameters(), key=lambda kv: kv[0])])


def save(form: str, model, opt, path: str) -> None:
    if form == "sharded":
        o = StateDictOptions()
    elif form == "full_offload":
        o = StateDictOptions(full_state_dict=True, cpu_offload=True)
    else:
        o = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    state = {"model": get_model_state_dict(model, options=o),
             "optim": get_optimizer_state_dict(model, opt, options=o)}
    if form == "full_offload" and dist.get_rank() != 0:
        assert not state["model"] and not state["optim"], "cpu_offload: rank 0 only"
    dcp.save(state, checkpoint_id=path)


def load(form: str, model, opt, path: str) -> None:
    if form == "sharded":
        get_o = set_o = StateDictOptions()
    elif form == "full_offload":
        get_o = StateDictOptions(full_state_dict=True)
        set_o = StateDictOptions(full_state_dict=True, cpu_offload=True)
    else:       # rank 0 reads the whole state, the others nothing; set broadcasts it
        get_o = StateDictOptions(full_state_dict=True, cpu_offload=True)
        set_o = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    state = {"model": get_model_state_dict(model, options=get_o),
             "optim": get_optimizer_state_dict(model, opt, options=get_o)}
    dcp.load(state, checkpoint_id=path)
    if form == "full_bcast" and dist.get_rank() != 0:
        assert not state["model"] and not state["optim"], "rank 0 alone holds the state"
    set_model_state_dict(model, state["model"], options=set_o)
    set_optimizer_state_dict(model, opt, state["optim"], options=set_o)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="lpmpi")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--params", required=True)
    a = ap.parse_args()

    t0 = time.perf_counter()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, P = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    out = {"backend": a.backend, "P": P,
           "device_types": [d.type for d in pg._device_types],
           "cpu_backend": pg._get_backend(torch.device("cpu")).name(),
           "backend_name": pg._get_backend_name(), "cases": {}}
    params, digests = {}, []
    for mode in MODES:
        for form in FORMS:
            key = f"{mode}-{form}"
            path = os.path.join(a.dir, key)
            model, opt = build(mode, 0)
            first = train(model, opt, range(FIRST))
            save(form, model, opt, path)
            ref = train(model, opt, range(FIRST, FIRST + MORE))
            params[key + "-ref"] = full_params(model)
            del model, opt
            model, opt = build(mode, 1)           # fresh, other values until it loads
            load(form, model, opt, path)
            loaded = train(model, opt, range(FIRST, FIRST + MORE))
            params[key + "-loaded"] = full_params(model)
            digests.append(hashlib.sha256(params[key + "-loaded"].numpy().tobytes()).hexdigest())
            out["cases"][key] = {"first": first, "ref": ref, "loaded": loaded}
            del model, opt
            if rank == 0:
                print(f"case {key} ({time.perf_counter() - t0:.2f} s): first {first} ref {ref} "
                      f"loaded {loaded}", flush=True)
    every = [None] * P
    dist.all_gather_object(every, digests)
    out["same_on_every_rank"] = all(d == every[0] for d in every)
    if rank == 0:
        torch.save(params, a.params)
        with open(a.json, "w") as f:
            json.dump(out, f)
        print("SUMMARY suite=torch_state_dict", json.dumps({k: v for k, v in out.items()
                                                           if k != "cases"}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
