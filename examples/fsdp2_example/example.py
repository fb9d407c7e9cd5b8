# Copyright (c) 2017, Pytorch contributors.  All rights reserved.
# BSD 3-Clause License: the notice, conditions and disclaimer are in LICENSE beside this file.
#
# PyTorch's FSDP2 example, https://github.com/pytorch/examples distributed/FSDP2/example.py
# (commit 77f55b912142e11fcfdf5b530231fb9c52f181e8), adapted for lpmpi.  Patched, nothing else:
#   * CPU instead of CUDA: no check for 2 GPUs, the device is "cpu", and init_process_group
#     gets no device_id (torch 2.13 refuses a CPU one: "device_id parameter must be an
#     accelerator with an index");
#   * launched by mpiexec instead of torchrun: the rank comes from torch.distributed after
#     init_process_group (torchrun's LOCAL_RANK is not set); `import lpmpi.torch` registers
#     backend "lpmpi" and fills in MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE from MPI (gloo's
#     env:// rendezvous uses them);
#   * --backend lpmpi|gloo picks the backend (upstream: get_default_backend_for_device);
#   * options for a small run in seconds: --steps, --n-layers, --batch-size, --seq-len,
#     --vocab-size (upstream's values are their defaults) and --checkpoint-dir (upstream:
#     "checkpoints" in the working directory);
#   * rank 0 prints each step's loss and the checkpoint it loaded (upstream prints neither);
#   * model.py: Transformer.reset_parameters resets its layers too (upstream leaves the
#     blocks' weights as to_empty left them, uninitialized memory: NaN or 1e38 here).
#
#     mpiexec -n 2 python examples/fsdp2_example/example.py --backend lpmpi --dcp-api
#     mpiexec -n 2 python examples/fsdp2_example/example.py --backend lpmpi --dcp-api  # loads
#
# upstream's import order is kept (ruff's I001 off for this file); `import os` went with
# LOCAL_RANK.
# ruff: noqa: I001
import argparse

import torch
import torch.distributed as dist
from checkpoint import Checkpointer
from model import ModelArgs, Transformer
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
from utils import inspect_mixed_precision, inspect_model

import lpmpi.torch  # noqa: F401  (lpmpi: registers backend "lpmpi"; env:// from MPI)

def verify_min_gpu_count(min_gpus: int = 2) -> bool:
    """ verification that we have at least 2 gpus to run dist examples """
    has_gpu = torch.accelerator.is_available()
    gpu_count = torch.accelerator.device_count()
    return has_gpu and gpu_count >= min_gpus

def set_modules_to_forward_prefetch(model, num_to_forward_prefetch):
    for i, layer in enumerate(model.layers):
        if i >= len(model.layers) - num_to_forward_prefetch:
            break
        layers_to_prefetch = [
            model.layers[i + j] for j in range(1, num_to_forward_prefetch + 1)
        ]
        layer.set_modules_to_forward_prefetch(layers_to_prefetch)


def set_modules_to_backward_prefetch(model, num_to_backward_prefetch):
    for i, layer in enumerate(model.layers):
        if i < num_to_backward_prefetch:
            continue
        layers_to_prefetch = [
            model.layers[i - j] for j in range(1, num_to_backward_prefetch + 1)
        ]
        layer.set_modules_to_backward_prefetch(layers_to_prefetch)


def main(args):
    # lpmpi: CPU, under mpiexec (upstream: 2 GPUs, torchrun's LOCAL_RANK)
    device = torch.device("cpu")
    backend = args.backend
    torch.distributed.init_process_group(backend=backend)  # lpmpi: no device_id (see top)
    rank = dist.get_rank()
    print(f"Running on rank {rank} on device {device}")

    torch.manual_seed(0)
    vocab_size = args.vocab_size
    batch_size = args.batch_size
    seq_len = args.seq_len
    model_args = ModelArgs(
        n_layers=args.n_layers,
        n_heads=4,
        vocab_size=vocab_size,
        max_seq_len=seq_len,
        dropout_p=0,
    )
    with torch.device("meta"):
        model = Transformer(model_args)
    fsdp_kwargs = {}
    if args.mixed_precision:
        fsdp_kwargs["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16,
            reduce_dtype=torch.float32,
        )
    for layer in model.layers:
        fully_shard(layer, **fsdp_kwargs)
    fully_shard(model, **fsdp_kwargs)

    inspect_model(model)

    if args.explicit_prefetching:
        set_modules_to_forward_prefetch(model, num_to_forward_prefetch=2)
        set_modules_to_backward_prefetch(model, num_to_backward_prefetch=2)

    checkpointer = Checkpointer(args.checkpoint_dir, dcp_api=args.dcp_api)
    if checkpointer.last_training_time is None:
        model.to_empty(device=device)
        model.reset_parameters()
    else:
        if rank == 0:
            print(f"Loading checkpoint {checkpointer.last_training_time}")
        checkpointer.load_model(model)
    
    if args.mixed_precision:
        inspect_mixed_precision(model)

    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    if checkpointer.last_training_time is not None:
        checkpointer.load_optim(model, optim)

    for step in range(args.steps):
        if args.explicit_prefetching:
            model.unshard()
        x = torch.randint(0, vocab_size, (batch_size, seq_len), device=device)
        loss = model(x).sum()
        if rank == 0:
            print(f"step {step} loss {loss.item()!r}", flush=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optim.step()
        optim.zero_grad()

    checkpointer.save(model, optim)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="PyTorch FSDP2 example")
    parser.add_argument("--explicit-prefetching", action="store_true", default=False)
    parser.add_argument("--mixed-precision", action="store_true", default=False)
    parser.add_argument("--dcp-api", action="store_true", default=False)
    # lpmpi: the backend, and a small run on a few CPU cores
    parser.add_argument("--backend", choices=("lpmpi", "gloo"), default="lpmpi")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--n-layers", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=1024)
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    args = parser.parse_args()
    
    main(args)
