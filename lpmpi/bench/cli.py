"""The command line of ``python -m lpmpi.bench`` (``lpmpi-bench``): its parser, the option checks,
and :func:`main`, which runs the plain table, ``--compare-grid`` or ``--scaling`` per collective
and writes the JSON.  :class:`Parser` (an ArgumentParser that speaks on one rank only) and the
argument types :func:`size_arg` and :func:`sizes_arg` serve the tuner's command line too.

Run it under ``mpiexec``; only rank 0 prints::

    mpiexec -n 2 lpmpi-bench
    mpiexec -n 4 lpmpi-bench --collective all --sizes 8,1K,1M,64MiB --json bench.json
    mpiexec -n 2 lpmpi-bench --sizes 1M:64M:x2 --algorithms lp,native --dtype float64
    mpiexec -n 2 lpmpi-bench --sizes 64K:64M:x4 --algorithms ring,auto --transports mpi,shm,cma

Started as one process (without mpiexec) it refuses, with exit status 2, unless
``--allow-single``.

Exit status: 0, 1 if any lpmpi result mismatched or any lpmpi algorithm failed, 2 bad usage
(or one process without ``--allow-single``).
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi._launch import add_allow_single, refuse_single
from lpmpi._units import parse_size, parse_sizes
from lpmpi.bench.cases import (
    AUTO,
    GLOO,
    GLOO_CALLS,
    GLOO_OPS,
    MPI4PY,
    Case,
    Row,
    Settings,
    build_cases,
    resolve_dtype,
)
from lpmpi.bench.forms import FORMS, run_forms
from lpmpi.bench.grid import run_compare_grid
from lpmpi.bench.harness import DEFAULT_MIN_TIME, DEFAULT_WARMUP, MAX_REPS, MIN_REPS
from lpmpi.bench.memory import MEMORY_BACKENDS, memory_backend
from lpmpi.bench.nodes import node_transports, run_node_bytes
from lpmpi.bench.online import plot, run_online
from lpmpi.bench.overlap import COMPUTES, run_overlap
from lpmpi.bench.report import environment_header, format_header
from lpmpi.bench.rows import measure_memory_bandwidth, run_collective
from lpmpi.bench.scaling import run_scaling
from lpmpi.engine import COLLECTIVES, OPS, TRANSPORTS

DEFAULT_SIZES = "8,16:64MiB:x4"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that prints (help, usage, errors) on one rank only: ``quiet`` on the
    others, which still parse and exit alike."""

    def __init__(self, *args: Any, quiet: bool = False, **kwargs: Any) -> None:
        self._quiet = quiet
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file: Any = None) -> None:
        if not self._quiet:
            super()._print_message(message, file)


def add_flag(p: argparse.ArgumentParser, name: str, default: bool, help: str) -> argparse.Action:
    """An on/off option ``--name`` / ``--no-name`` whose help ends with its default once
    (argparse's BooleanOptionalAction appends its own "(default: True)" in some versions)."""
    action = p.add_argument(name, action=argparse.BooleanOptionalAction, default=default)
    action.help = f"{help} (default: {'on' if default else 'off'})"
    return action


def size_arg(text: str) -> int:
    """argparse type: a positive byte count (``8``, ``64KiB``, ``1M``)."""
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def sizes_arg(text: str) -> list[int]:
    """argparse type: a ``--sizes`` value (a list and/or ``lo:hi[:xF|:+S]`` ranges)."""
    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def csv_list(text: str) -> list[str]:
    """A comma-separated option value as a list, blanks dropped: ``"a, b,"`` -> ``["a", "b"]``."""
    return [a.strip() for a in text.split(",") if a.strip()]


def build_parser(quiet: bool = False) -> argparse.ArgumentParser:
    """The command-line parser (``quiet`` silences it on ranks other than 0)."""
    p = Parser(
        prog="lpmpi-bench",
        description="Time lpmpi's algorithms, auto, the MPI library's native collective and mpi4py "
        "side by side over a range of message sizes (run under mpiexec).",
        epilog="example: mpiexec -n 2 lpmpi-bench --collective all --sizes 8,1K,1M,64MiB",
        quiet=quiet,
    )
    p.add_argument("--collective", choices=[*COLLECTIVES, "all"], default="allreduce",
                   help="the collective to time, or all of them one after the other (default allreduce)")
    p.add_argument(
        "--sizes",
        type=sizes_arg,
        default=parse_sizes(DEFAULT_SIZES),
        help="message sizes in bytes: a list and/or lo:hi[:xF|:+S] ranges, binary units, "
        f"e.g. 8,1K,64K,1M,64MiB or 8:64MiB:x4 (hi always included; default {DEFAULT_SIZES})",
    )
    p.add_argument("--dtype", default="float32",
                   help="numpy dtype name (default float32; bfloat16 needs ml_dtypes)")
    p.add_argument("--op", default="sum", type=str.lower, choices=OPS, help="reduction op (default sum)")
    p.add_argument("--root", type=int, default=0, help="root rank of reduce and bcast (default 0)")
    p.add_argument(
        "--algorithms",
        type=csv_list,
        help="comma-separated subset of the algorithms, auto and mpi4py (default: all)",
    )
    p.add_argument("--chunk-bytes", type=size_arg,
                   help="chunk_bytes for the explicit algorithms, e.g. 256K (default: the engine's choice)")
    p.add_argument(
        "--transports",
        type=csv_list,
        help=f"host memory, the plain table, --forms and --compare-grid: time the algorithms that run "
        f"over a node-local transport (the ring allreduce) once per transport of this list "
        f"({','.join(TRANSPORTS)}), rows labelled e.g. ring@shm, instead of once over the engine's "
        "choice (--compare-grid: default every transport the communicator has)",
    )
    p.add_argument(
        "--compression",
        type=csv_list,
        default=[],
        help="the plain table, allreduce / reduce_scatter / allgather of floating data: one more "
        "row per compression of this list (bf16,int8,int4), auto with compression= (lossy: "
        "checked against docs/compression.md's bounds, not against native's bits), labelled e.g. "
        "auto+int8",
    )
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP,
                   help=f"warm-up repetitions per size, every algorithm once each (default {DEFAULT_WARMUP})")
    p.add_argument("--reps", type=int,
                   help=f"timed repetitions per size (default adaptive, {MIN_REPS}..{MAX_REPS})")
    p.add_argument("--min-time", type=float, default=DEFAULT_MIN_TIME,
                   help=f"adaptive reps: seconds of timed calls per size and algorithm (default {DEFAULT_MIN_TIME})")
    p.add_argument("--json", metavar="PATH", help="also write the header and all rows as JSON to PATH")
    add_flag(p, "--check", True, "check every result against native's; exit 1 on mismatch")
    add_flag(p, "--bandwidth", True, "measure the memory bandwidth first")
    p.add_argument("--memory", choices=sorted(MEMORY_BACKENDS), default="host",
                   help="where buffers live: host (numpy) or cuda (CuPy, one GPU per rank of a node; "
                   "default host)")
    p.add_argument(
        "--compare-grid",
        action="store_true",
        help="measure the exhaustive grid (every algorithm x chunk sizes in powers of two) per size "
        "and report its best, the tuning table's choice and auto: the tuner's regret",
    )
    p.add_argument(
        "--online",
        action="store_true",
        help="the online tuner (LPMPI_AUTOTUNE) in a training loop: per size, --calls calls on a fresh "
        "communicator with the tuner on, timed one by one, against the exhaustive grid, the static "
        "choice and MPI's own measured in the same run (calls to settle, exploration cost, settled "
        "time over the grid's best); lpmpi/bench/online.py",
    )
    p.add_argument("--calls", type=int, default=128, help="--online: calls per phase (default 128)")
    p.add_argument("--busy", action="store_true",
                   help="--online: a busy process per node joins after the first phase and leaves after "
                   "the second (the grid measured again under it)")
    p.add_argument("--plot", metavar="PNG", help="--online: the per-call times as a picture (matplotlib)")
    p.add_argument(
        "--scaling",
        action="store_true",
        help="time against P: every algorithm on sub-communicators of 2..P ranks, in this one run",
    )
    p.add_argument(
        "--forms",
        type=csv_list,
        help=f"time each algorithm in these forms side by side: a comma-separated subset of "
        f"{','.join(FORMS)} (nonblocking: i* + wait; persistent: *_init, start + wait; inplace: "
        "IN_PLACE), with each form's time over the blocking call's",
    )
    p.add_argument(
        "--fresh-input",
        action="store_true",
        help="--forms: before every timed call, outside its time, rewrite the call's input with its "
        "values (as a training step's backward writes the gradient its allreduce then reads); "
        "without it an out-of-place input stays as the first call left it, read-only in both "
        "ranks' caches",
    )
    p.add_argument(
        "--read-result",
        action="store_true",
        help="--forms, host memory: after every call, inside its time, read the whole result (as "
        "the optimizer step reads what the allreduce wrote): a result written past the caches "
        "(streamed) costs its reader, which the call alone does not show",
    )
    p.add_argument(
        "--peers",
        action="store_true",
        help="allreduce, allgather, reduce_scatter on host memory: add rows for torch.distributed's "
        "gloo all_reduce / all_gather_single / reduce_scatter_single on the same buffers, side by "
        "side (needs torch; gloo's group is set up from the MPI ranks)",
    )
    p.add_argument(
        "--overlap",
        action="store_true",
        help="allreduce: start iallreduce, compute for about as long, wait; the overlap efficiency "
        "with and without the progress thread (default algorithms: auto)",
    )
    p.add_argument(
        "--node-bytes",
        action="store_true",
        help="no timing: one call per size and algorithm, and the bytes each rank sent to ranks "
        "on other nodes (lpmpi's own transfers; chains and rings follow node order)",
    )
    p.add_argument(
        "--compute",
        type=csv_list,
        default=list(COMPUTES),
        help=f"--overlap: the compute phases, a subset of {','.join(COMPUTES)} (sleep: a GIL-releasing "
        "wait, numpy: a numpy kernel; default both)",
    )
    add_allow_single(p)
    return p


def _validate(p: argparse.ArgumentParser, args: argparse.Namespace, nprocs: int) -> np.dtype:
    """Check option values the parser cannot; return the dtype."""
    try:
        dtype = resolve_dtype(args.dtype)
    except ValueError as exc:
        p.error(f"--dtype: {exc}")
    if not 0 <= args.root < nprocs:
        p.error(f"--root {args.root} is out of range for {nprocs} processes")
    if args.reps is not None and args.reps < 1:
        p.error("--reps must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if not args.min_time > 0:
        p.error("--min-time must be > 0")
    if args.forms is not None:
        bad = [f for f in args.forms if f not in FORMS]
        if bad or not args.forms:
            p.error(f"--forms: unknown {', '.join(bad) or '(none given)'} (known: {', '.join(FORMS)})")
    bad = [c for c in args.compute if c not in COMPUTES]
    if bad or not args.compute:
        p.error(f"--compute: unknown {', '.join(bad) or '(none given)'} (known: {', '.join(COMPUTES)})")
    if args.fresh_input and not args.forms:
        p.error("--fresh-input applies to --forms")
    if args.read_result and (not args.forms or args.memory != "host"):
        p.error("--read-result applies to --forms on host memory")
    modes = [m for m in ("compare_grid", "scaling", "forms", "overlap", "node_bytes", "online") if getattr(args, m)]
    if (args.busy or args.plot) and not args.online:
        p.error("--busy and --plot apply to --online")
    if args.online and (args.memory != "host" or args.collective == "all" or args.calls < 8):
        p.error("--online: one collective (--collective), host memory, --calls >= 8")
    if len(modes) > 1:
        p.error("--" + " and --".join(m.replace("_", "-") for m in modes) + " cannot be combined")
    if args.transports is not None:
        bad = [t for t in args.transports if t not in TRANSPORTS]
        if bad or not args.transports:
            p.error(f"--transports: unknown {', '.join(bad) or '(none given)'} "
                    f"(known: {', '.join(TRANSPORTS)})")
        if args.memory != "host" or any(m not in ("forms", "compare_grid") for m in modes):
            p.error("--transports applies to the plain table, --forms and --compare-grid on host memory")
    if args.compression:
        known = lpmpi._core.COMPRESSIONS
        bad = [c for c in args.compression if c not in known]
        if bad:
            p.error(f"--compression: unknown {', '.join(bad)} (known: {', '.join(known)})")
        if modes or args.memory != "host":
            p.error("--compression adds rows to the plain table on host memory")
        if dtype.kind != "f" and dtype.name != "bfloat16":
            p.error(f"--compression needs floating data (--dtype float32 ...), not {dtype.name}")
        if args.op not in ("sum", "avg"):
            p.error(f"--compression: op sum or avg, not {args.op}")
    if args.peers:
        if args.collective not in GLOO_CALLS or args.memory != "host":
            p.error(f"--peers compares {', '.join(GLOO_CALLS)} on host memory (--collective)")
        if any(getattr(args, m) for m in ("compare_grid", "scaling", "forms", "overlap", "node_bytes")):
            p.error("--peers adds rows to the plain table: it does not combine with "
                    "--compare-grid, --scaling, --forms, --overlap or --node-bytes")
        if args.op not in GLOO_OPS and args.collective != "allgather":
            p.error(f"--peers: gloo has no {args.op} (it has {', '.join(GLOO_OPS)})")
        try:
            import torch.distributed  # noqa: F401
        except ImportError:
            p.error("--peers needs torch (pip install 'lpmpi[torch]')")
    if args.overlap and args.collective != "allreduce":
        p.error("--overlap measures allreduce (--collective allreduce)")
    if args.algorithms is not None:
        collectives = COLLECTIVES if args.collective == "all" else (args.collective,)
        known = {a for c in collectives for a in lpmpi.algorithms(c)} | {AUTO, MPI4PY}
        unknown = [a for a in args.algorithms if a not in known]
        if unknown:
            p.error(f"--algorithms: unknown {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return dtype


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return 0, or 1 if any lpmpi result mismatched or any algorithm failed
    (argparse exits with 2 on bad usage), or 2 as one process without ``--allow-single``."""
    comm = MPI.COMM_WORLD
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    parser = build_parser(quiet=rank != 0)
    args = parser.parse_args(argv)
    dtype = _validate(parser, args, nprocs)
    refused = refuse_single("lpmpi-bench", nprocs, args.allow_single)
    if refused is not None:
        return refused

    def out(line: str) -> None:
        if rank == 0:
            print(line, flush=True)

    counts = list(dict.fromkeys(max(1, n // dtype.itemsize) for n in args.sizes))
    transports, lacking = None, []
    if args.transports is not None:      # those this communicator has (collective: prepares it)
        have = node_transports(comm)
        transports = [t for t in args.transports if t in have]
        lacking = [t for t in args.transports if t not in have]
    elif args.compare_grid and args.memory == "host":   # the grid searches every one, as the tuner
        transports = node_transports(comm)
    header = environment_header(comm, args, dtype, [c * dtype.itemsize for c in counts])
    header["transports"] = transports
    for line in format_header(header):
        out(line)
    if args.bandwidth and not args.node_bytes:
        header["memory_bandwidth"] = measure_memory_bandwidth(comm)
        out(format_header(header)[-1])
    if lacking:
        out(f"# note: no rows over {', '.join(lacking)}: this communicator does not have "
            f"{'it' if len(lacking) == 1 else 'them'} (the ring would take the model's rule instead)")
    if args.op == "avg" and (args.algorithms is None or MPI4PY in args.algorithms):
        out("# note: no mpi4py row, as avg has no MPI op")

    if args.peers:
        import lpmpi.torch
        lpmpi.torch.init_process_group(comm)
        how = " (copy into recvbuf, then in place)" if args.collective == "allreduce" else ""
        out(f"# peers: torch.distributed gloo {GLOO_CALLS[args.collective][0]}{how}")
    backend = memory_backend(args.memory, comm)
    collectives = COLLECTIVES if args.collective == "all" else (args.collective,)
    all_rows: list[Row] = []
    overlap_rows: list[dict[str, Any]] = []
    online_rows: list[dict[str, Any]] = []
    node_rows: list[dict[str, Any]] = []
    summaries: dict[str, Any] = {}
    for collective in collectives:
        cases = build_cases(collective, args.algorithms, args.chunk_bytes, args.op, transports,
                            args.compression)
        if args.peers:
            cases.append(Case(GLOO, None))
        if not backend.mpi_readable:  # --memory cuda, MPI not CUDA-aware
            cases = [c for c in cases if c.label != MPI4PY]
        if args.compare_grid:
            cases = [Case(AUTO, AUTO)]  # (the grid's cases are built per size)
        if args.forms or args.overlap:
            cases = [c for c in cases if c.algorithm is not None]   # lpmpi's own forms only
            if args.overlap and args.algorithms is None:
                cases = [Case(AUTO, AUTO)]
        if not cases:
            out(f"# {collective}: none of the requested algorithms applies")
            continue
        bound = bool(args.bandwidth and args.memory == "host" and header["nhosts"] == 1)
        s = Settings(collective, dtype, args.op, args.root, args.warmup, args.reps, args.min_time,
                     args.check, backend, args.fresh_input, bound, args.read_result)
        if args.online:
            online_rows, summaries[collective] = run_online(comm, s, counts, args.calls, args.busy, out)
            rows = []
            if args.plot and rank == 0:
                why = plot(online_rows, args.plot)
                out(f"# {why}" if why else f"# wrote {args.plot}")
        elif args.compare_grid:
            rows, summaries[collective] = run_compare_grid(comm, s, counts, out, transports or ())
        elif args.scaling:
            rows, summaries[collective] = run_scaling(comm, s, counts, cases, out)
        elif args.forms:
            rows, summaries[collective] = run_forms(comm, s, counts, cases, args.forms, out)
        elif args.overlap:
            overlap_rows, summaries[collective] = run_overlap(comm, s, counts, cases, args.compute, out)
            rows = []
        elif args.node_bytes:
            rows_n, summaries[collective] = run_node_bytes(comm, s, counts, cases, out)
            node_rows += rows_n
            rows = []
        else:
            rows, summaries[collective] = run_collective(comm, s, counts, cases, out)
        all_rows.extend(rows)

    if args.peers:
        import torch.distributed as dist
        dist.destroy_process_group()
    failed = [r for r in all_rows if r.check in ("MISMATCH", "ERROR")]
    if failed:
        out(
            f"\n# FAILED: {len(failed)} row(s): "
            + ", ".join(f"{r.collective}/{r.label}/{r.nbytes}B {r.check}" for r in failed[:20])
            + (" ..." if len(failed) > 20 else "")
        )
    if args.json and rank == 0:
        doc = {
            "header": header,
            "rows": [asdict(r) for r in all_rows],
            **({"overlap": overlap_rows} if overlap_rows else {}),
            **({"online": online_rows} if online_rows else {}),
            **({"node_bytes": node_rows} if node_rows else {}),
            "summary": summaries,
            "status": "failed" if failed else "ok",
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, default=str)
            f.write("\n")
        out(f"# wrote {args.json}")
    return 1 if failed else 0
