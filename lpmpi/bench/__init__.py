"""Benchmark lpmpi's collectives against the MPI library's own, side by side; also the
measurement library of the tuner (``tuner/``).

Run it under ``mpiexec``; only rank 0 prints::

    mpiexec -n 2 python -m lpmpi.bench
    mpiexec -n 4 python -m lpmpi.bench --collective all --sizes 8,1K,1M,64MiB --json bench.json
    mpiexec -n 2 python -m lpmpi.bench --sizes 1M:64M:x2 --algorithms lp,native --dtype float64

For every message size and every algorithm of ``lpmpi.algorithms(collective)``, plus ``auto``
(with the algorithm and chunk that ``lpmpi.select`` says it picks) and ``mpi4py`` (mpi4py's own
``comm.Allreduce``/``Reduce``/``Bcast``, the per-call overhead reference), it prints one row::

    size  algorithm  time_us  algbw_GB/s  busbw_GB/s  speedup_vs_native  of_bound  check

Methodology (:mod:`lpmpi.bench.harness`, the one timing method of the benchmark and the tuner).
All algorithms of one size are measured together: each repetition runs every algorithm once, in
an order that rotates from one repetition to the next, so that drift on a shared machine hits
them alike.  Each call is preceded by ``comm.Barrier()`` and timed with ``time.perf_counter`` on
every rank; a repetition's time is the maximum over ranks (the slowest rank counts; the per-rank
times are reduced with ``MPI.MAX`` after the timed loop, never inside it); the reported time is
the median over repetitions.  The number of repetitions adapts to the size (``--min-time``
seconds per size and algorithm, at least 5, at most 1000) unless ``--reps`` fixes it.
algbw = bytes / time; busbw scales algbw as nccl-tests does (allreduce 2(P-1)/P, reduce and
bcast 1).  of_bound: the memory-traffic lower bound of the call on one node
(:mod:`lpmpi.bench.bound`, at the copy bandwidth the header measures) over the row's time, in
percent (100% is at the bound); the summary gives the distance at the largest size.  Every row's result is checked against ``native``'s (which is itself checked against
a numpy reduction at sampled elements); the process exits with status 1 on any mismatch or error
of an lpmpi algorithm.

The modules, one job each:

- :mod:`~lpmpi.bench.harness`: timing (warm-up, interleaving, slowest rank, median, adaptive
  repetitions, the tuner's pruning checkpoint);
- :mod:`~lpmpi.bench.memory`: where buffers live (host, cuda, the fake device of the tests);
- :mod:`~lpmpi.bench.cases`: what a row measures (cases, settings, buffers, calls, rows);
- :mod:`~lpmpi.bench.verify`: the input pattern, the expected values, the checks;
- :mod:`~lpmpi.bench.bound`: the memory-traffic lower bound of a collective on one node;
- :mod:`~lpmpi.bench.rows`: one size's rows and a collective's table; the memory bandwidth;
- :mod:`~lpmpi.bench.report`: the header, the table's lines and the summary;
- :mod:`~lpmpi.bench.grid`: ``--compare-grid``; :mod:`~lpmpi.bench.scaling`: ``--scaling``;
- :mod:`~lpmpi.bench.cli`: the command line (``python -m lpmpi.bench``, ``lpmpi-bench``);
- :mod:`~lpmpi.bench.launches`: ``python -m lpmpi.bench.launches`` (not under mpiexec): the
  benchmark in N fresh launches, every other one pinned, and each figure's spread over them.

This package re-exports the names the tuner and the tests use, with the byte-size grammar
(:func:`parse_size`, :func:`parse_sizes`, :func:`format_bytes`, :func:`chunk_label`) and the
launch check of the command-line tools (:func:`refuse_single`, :func:`add_allow_single`: refuse
to run as one process, started without mpiexec or by another MPI's launcher).
"""
from __future__ import annotations

from lpmpi._launch import add_allow_single, refuse_single
from lpmpi._units import chunk_label, chunk_text, format_bytes, parse_size, parse_sizes
from lpmpi.bench.cases import (
    AUTO,
    MPI4PY,
    NATIVE,
    Buffers,
    Case,
    Row,
    Settings,
    build_cases,
    bus_factor,
    make_call,
    mpi_op,
    resolve_dtype,
    with_transport,
)
from lpmpi.bench.cli import DEFAULT_SIZES, Parser, add_flag, build_parser, main, size_arg, sizes_arg
from lpmpi.bench.grid import (
    CONFIRM_TIME,
    CONFIRM_TOP,
    GRID_HEADER,
    REGRET_TARGET,
    TUNED,
    GridRow,
    finalists,
    format_grid_row,
    grid_cases,
    grid_row,
    is_grid_label,
    run_compare_grid,
    summarize_grid,
    tuned_choice,
)
from lpmpi.bench.harness import (
    DEFAULT_MIN_TIME,
    DEFAULT_WARMUP,
    MAX_REPS,
    MIN_REPS,
    Call,
    Checkpoint,
    Prepared,
    Repetitions,
    Timing,
    estimate,
    max_over_ranks,
    measure,
    probe,
    refilled,
)
from lpmpi.bench.memory import (
    MEMORY_BACKENDS,
    CudaMemory,
    FakeDeviceMemory,
    HostMemory,
    device_problem,
    fake_device,
    memory_backend,
    selection_memory,
)
from lpmpi.bench.nodes import node_transports, rule_transport, transports_of
from lpmpi.bench.report import (
    environment_header,
    format_header,
    format_row,
    format_table_header,
    speedup_verdict,
    summarize,
)
from lpmpi.bench.rows import measure_memory_bandwidth, run_collective, run_size
from lpmpi.bench.scaling import run_scaling
from lpmpi.bench.verify import (
    SENTINEL,
    check_case,
    expected_values,
    is_inexact,
    make_buffers,
    native_reference,
    pattern,
    same_result,
    sample_indices,
)
from lpmpi.engine import COLLECTIVES, OPS

__all__ = [
    "AUTO", "COLLECTIVES", "CONFIRM_TIME", "CONFIRM_TOP", "DEFAULT_MIN_TIME", "DEFAULT_SIZES",
    "DEFAULT_WARMUP", "GRID_HEADER", "MAX_REPS", "MEMORY_BACKENDS", "MIN_REPS", "MPI4PY", "NATIVE",
    "OPS", "REGRET_TARGET", "SENTINEL", "TUNED", "Buffers", "Call", "Case", "Checkpoint",
    "CudaMemory", "FakeDeviceMemory", "GridRow", "HostMemory", "Parser", "Prepared", "Repetitions",
    "Row", "Settings", "Timing", "add_allow_single", "add_flag", "build_cases", "build_parser", "bus_factor",
    "check_case", "chunk_label", "chunk_text", "device_problem", "environment_header", "estimate",
    "expected_values", "fake_device", "finalists", "format_bytes", "format_grid_row",
    "format_header", "format_row", "format_table_header", "grid_cases", "grid_row", "is_grid_label",
    "is_inexact", "main", "make_buffers", "make_call", "max_over_ranks", "measure",
    "measure_memory_bandwidth", "memory_backend", "mpi_op", "native_reference", "node_transports",
    "parse_size", "parse_sizes", "pattern", "probe", "refilled", "refuse_single", "resolve_dtype", "rule_transport",
    "run_collective", "run_compare_grid", "run_scaling", "run_size", "same_result", "sample_indices",
    "selection_memory", "size_arg", "sizes_arg", "speedup_verdict", "summarize", "summarize_grid",
    "transports_of", "tuned_choice", "with_transport",
]
