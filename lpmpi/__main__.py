"""``lpmpi-info`` / ``python -m lpmpi info``: what this lpmpi build is and what "auto" chooses.

``python -m lpmpi`` also runs the benchmark (``python -m lpmpi bench ...``, the same as
``lpmpi-bench``) and the tuner (``python -m lpmpi tune ...``, the same as ``lpmpi-tune``).
Run it under mpiexec (``mpiexec -n 2 lpmpi-info``) to see what "auto" picks at that P; rank 0
prints.  Run alone, it is one process (P = 1) and says so, with the command that launches it
(or, where the environment shows another MPI's launcher started it, that the launcher does not
match the MPI library mpi4py uses).
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
    from lpmpi import _abi, _core, _launch, engine

    comm = MPI.COMM_WORLD
    here = lpmpi.tables.fingerprint(comm)   # collective: before the other ranks wait
    nodes = _core.comm_nodes(comm)          # collective too (lpmpi's first call on comm)
    transport = _core.comm_transport(comm)
    if comm.rank != 0:
        comm.Barrier()
        return
    print(f"lpmpi {lpmpi.__version__} ({os.path.dirname(lpmpi.__file__)})")
    print(f"MPI library: {lpmpi.tables.library_version_line()}")
    print(_abi.describe())
    print(f"mpi4py {__import__('mpi4py').__version__}, processes: {comm.size}")
    for line in _launch.info_lines(comm.size):
        print(line)
    ndev = int(_core.cuda_info().get("devices", 0) or 0)
    print("CUDA support: " + ("no (built without nvcc/CUDA headers)" if not _core.CUDA_BUILD else
                              f"built with CUDA, {ndev} device(s) visible" if ndev else
                              "built with CUDA; no CUDA device is visible here"))
    print(_device_line(_core.cuda_info()))
    for coll in _core.COLLECTIVES:
        print(f"{coll} algorithms: {', '.join(lpmpi.algorithms(coll))}")
    print("requests (nonblocking, persistent): " + _core.request_forms(None))
    print("  " + _core.request_forms("native"))
    from lpmpi import _env as _e
    s = _e.settings
    print(f"flight recorder: {'last ' + str(s.fr_size) + ' calls per rank' if s.fr_size else 'off'}; dumps to "
          f"{s.fr_dir or 'lpmpi-fr (working directory)'} (watchdog, SIGUSR1, lpmpi.dump_flight_recorder()); "
          f"watchdog: {'LPMPI_TIMEOUT ' + str(s.timeout) + ' s raises, ' if s.timeout else ''}"
          f"{'LPMPI_ABORT_TIMEOUT ' + str(s.abort_timeout) + ' s aborts' if s.abort_timeout else 'no abort'}; "
          f"trace: {s.trace or 'off (LPMPI_TRACE=dir)'}")
    a, b, g = _core.model_get()
    print(f"model: alpha {a * 1e6:.2f} us, beta {1 / b / 1e9:.2f} GB/s, gamma {1 / g / 1e9:.2f} GB/s")
    print(f"machine: {here['cpu_model']}, {here['ranks_per_node']} rank(s) per node, {here['nodes']} node(s)")
    from lpmpi.bench.nodes import placement
    order = ("; chains and rings in node order" if len(set(nodes)) > 1 else "")
    print(f"nodes: {placement(nodes)}{order}")
    print(f"node-local transport: {transport[0]} ({transport[1]})")
    for line in lpmpi.tables.describe(here):
        print(line)
    print("settings (the knob table, lpmpi/_knobs.py: each LPMPI_* variable's value in force, and "
          "where it came from):")
    rows = _e.in_force()
    width = max(len(n) for n, _, _ in rows)
    for name, value, src in rows:
        print(f"  {name:{width}s} {value:>12s}  ({src})")
    unknown = sorted(k for k in os.environ if k.startswith("LPMPI_") and k not in _e.BY_NAME)
    if unknown:
        print(f"  not lpmpi's (misspelt?): {', '.join(unknown)}")
    tables = _core.choice("allreduce", 8, comm)[4]
    agree = {"same": "every rank holds this table",
             "rank 0": "the ranks' tables differ: every rank follows rank 0's",
             "unchecked": "not compared yet"}[tables]
    if comm.size == 1:
        print('"auto" at P = 1: one process has nothing to send (each collective copies its input or '
              'does nothing), whatever the choice below says; `mpiexec -n P lpmpi-info` shows auto\'s '
              'choices at P processes')
    print(f'"auto" at P = {comm.size} (host memory; ranks\' tables: {agree}):')
    for coll in engine.COLLECTIVES:
        for n in (8, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26):
            alg, chunk, _, src, _ = _core.choice(coll, n, comm)
            ch = f", chunk {_size(chunk)}" if chunk else ""
            print(f"  {coll:9s} {_size(n):>8s}: {alg}{ch}  [{src}]")
    print('"auto" with acc_dtype="float32" (16-bit data summed in float32, decided for its float32 copy; '
          'sizes of the 16-bit data):')
    for coll in engine.COLLECTIVES:
        if not engine.collective_info(coll).has_op:
            continue
        for n in (8, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26):
            alg, chunk, _, src, _ = _core.choice(coll, n, comm, acc=True)
            ch = f", chunk {_size(chunk)}" if chunk else ""
            print(f"  {coll:9s} {_size(n):>8s}: {alg}{ch}  [{src}]")
    from lpmpi import _env, autotune
    if _env.settings.autotune:
        keys, learned = autotune.state(), autotune.path()
        st = lpmpi.tables.status()
        warm = len(st.warm) if st else 0
        print(f"online tuning (LPMPI_AUTOTUNE=1): {len(keys)} key(s) in this process"
              + (f"; {warm} learned row(s) from {learned} (their keys start settled), this run's merged "
                 "into it at exit" if learned else "; no file of learned rows (LPMPI_AUTOTUNE_FILE=none)"))
        for line in autotune.describe(keys):
            print("  " + line)
    else:
        print("online tuning: off (LPMPI_AUTOTUNE=1 turns it on)")
    comm.Barrier()


def info_main(argv: list[str] | None = None) -> int:
    """``lpmpi-info``."""
    p = argparse.ArgumentParser(prog="lpmpi-info", description=__doc__.splitlines()[0].split(": ", 1)[1])
    p.parse_args(argv)
    info()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m lpmpi [info | bench ... | tune ...]``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        from lpmpi.bench.cli import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["tune"]:
        from lpmpi.tune.cli import main as tune_main

        return int(tune_main(argv[1:]) or 0)
    p = argparse.ArgumentParser(
        prog="python -m lpmpi",
        description="lpmpi's tools: info (this build and what auto chooses), bench (the "
                    "benchmark, as lpmpi-bench), tune (the autotuner, as lpmpi-tune); "
                    "`python -m lpmpi bench --help` for its options")
    p.add_argument("command", choices=["info", "bench", "tune"], nargs="?", default="info")
    p.parse_args(argv)
    info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
