"""``python -m lpmpi info``: what this lpmpi build is and what "auto" would choose.

Run it alone or under mpiexec (``mpiexec -n 2 python -m lpmpi info``); rank 0 prints.
"""
from __future__ import annotations

import argparse
import os
import sys


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _device_line(cuda: dict) -> str:
    """One line from ``_core.cuda_info()``: transport, visible devices, staging buffers.

    >>> _device_line({"built": True, "emulated": False, "devices": 2, "transport": "staged",
    ...               "staging_buffers": 4})
    'device memory: transport staged, 2 CUDA device(s), 4 staging buffers'
    """
    line = (f"device memory: transport {cuda['transport']}, {cuda['devices']} CUDA device(s), "
            f"{cuda['staging_buffers']} staging buffers")
    return line + ("; emulated on the host (LPMPI_EMULATE_STAGING)" if cuda.get("emulated") else "")


def info() -> None:
    from mpi4py import MPI

    import lpmpi
    from lpmpi import _core

    comm = MPI.COMM_WORLD
    here = lpmpi.tables.fingerprint(comm)   # collective: before the other ranks wait
    if comm.rank != 0:
        comm.Barrier()
        return
    print(f"lpmpi {lpmpi.__version__} ({os.path.dirname(lpmpi.__file__)})")
    print(f"MPI library: {MPI.Get_library_version().splitlines()[0].strip()}")
    print(f"mpi4py {__import__('mpi4py').__version__}, processes: {comm.size}")
    print(f"CUDA support: {'yes' if _core.CUDA_BUILD else 'no (built without nvcc/CUDA headers)'}")
    print(_device_line(_core.cuda_info()))
    for coll in ("allreduce", "reduce", "bcast"):
        print(f"{coll} algorithms: {', '.join(lpmpi.algorithms(coll))}")
    a, b, g = _core.model_get()
    print(f"model: alpha {a * 1e6:.2f} us, beta {1 / b / 1e9:.2f} GB/s, gamma {1 / g / 1e9:.2f} GB/s")
    print(f"machine: {here['cpu_model']}, {here['ranks_per_node']} rank(s) per node, {here['nodes']} node(s)")
    for line in lpmpi.tables.describe(here):
        print(line)
    env = {k: v for k, v in os.environ.items() if k.startswith("LPMPI_")}
    print(f"environment: {env if env else 'no LPMPI_* variables'}")
    print(f'"auto" at P = {comm.size} (host memory):')
    for coll in ("allreduce", "reduce", "bcast"):
        for n in (8, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26):
            alg, chunk, src = _core.explain_choice(coll, n, comm)
            ch = f", chunk {_size(chunk)}" if chunk else ""
            print(f"  {coll:9s} {_size(n):>8s}: {alg}{ch}  [{src}]")
    comm.Barrier()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lpmpi", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["info"], nargs="?", default="info")
    p.parse_args(argv)
    info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
