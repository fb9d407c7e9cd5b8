"""lpmpi's environment variables, read in one place, once, at import (as NCCL reads NCCL_*).

Every variable lpmpi reads is in :data:`VARIABLES` (the README's and docs/api.md's tables come
from the same list); :func:`read` parses them all, warning once about each value it cannot use
(and then ignoring it), and :func:`apply` hands them to the engine.  Nothing else in lpmpi reads
``os.environ`` for an ``LPMPI_*`` name.

>>> s = read({"LPMPI_CHUNK_BYTES": "256KiB", "LPMPI_ALGORITHM": "LP"})
>>> s.chunk_bytes, s.algorithm
(262144, 'lp')
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from lpmpi import engine
from lpmpi._units import parse_size

_W, _S = engine.WINDOW_MAX, engine.STAGING_MAX

#: (name, value, what it does): every variable lpmpi reads
VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("LPMPI_ALGORITHM", "name", ('force "auto" to one algorithm (lp, mst, be, ring, pairwise, linear, '
     "native; any case); a collective lacking it stays on auto")),
    ("LPMPI_CHUNK_BYTES", "size", "force the chunk size of chunked algorithms (1K at least: 1K, 64K, 1MiB, ...; smaller values warn and are ignored)"),
    ("LPMPI_TUNING_FILE", "path[:path...]|none", "load these tuning tables instead of the shipped ones; none: no table"),
    ("LPMPI_TABLES_AS", "table file", ("load the shipped tables as they apply on the machine this shipped "
     "table (a file name in lpmpi/tables, or a path) was measured on: its MPI library and CPU model, "
     "whatever this machine's (tests: every shipped table's decisions on any machine); every rank must "
     "set the same")),
    ("LPMPI_WINDOW", f"1..{_W}", "chunks in flight per direction of the pipelines (default 4)"),
    ("LPMPI_CHECK", "0|1", ("check on every call that all ranks agree (count, dtype, op, root, "
     "algorithm, chunk): MismatchError instead of a hang; other values warn and are ignored, as for "
     "every 0|1 switch")),
    ("LPMPI_DEBUG", "0|1", ("print on every rank each choice of auto (once per collective and size, "
     "naming the rank) and the source file:line of every error")),
    ("LPMPI_STAGING_BUFFERS", f"1..{_S}", ("staging buffers per direction of the staged device pipeline "
     "(default 4)")),
    ("LPMPI_CUDA_AWARE", "0|1", ("device memory: force the transport (1: the MPI library reads device "
     "memory, 0: staged through the host); unset: ask the library")),
    ("LPMPI_EMULATE_STAGING", "0|1", ("emulate the staged device path on the host (every buffer is "
     "treated as device memory; tests)")),
    ("LPMPI_MAX_MSG_BYTES", "size", "largest single MPI message (bigger transfers are split; tests)"),
    ("LPMPI_PROGRESS_THREAD", "0|1", ("start the background progress thread at import: it advances "
     "nonblocking and persistent requests while the program computes (needs MPI_THREAD_MULTIPLE)")),
    ("LPMPI_NODE_TRANSPORT", "auto|shm|cma|mpi", ("between ranks of one node, for the ring allreduce, allgather and reduce_scatter: "
     "auto (default) uses lpmpi's shared-memory transport and single-copy process_vm_readv reads, "
     "each at the sizes where it measured faster (either alone where the other cannot work); "
     "shm or cma only that one; mpi keeps MPI point-to-point")),
    ("LPMPI_TIMEOUT", "seconds", ("the watchdog: a collective not complete after this long raises "
     "LPError on the ranks waiting for it, naming what it waits for (the communicator is unusable "
     "then: e.g. comm.Abort()); default off, free when off; on, waits poll instead of blocking in MPI")),
    ("LPMPI_AUTOTUNE", "0|1", ("tune \"auto\" while the program runs: per communicator, collective and size "
     "class, blocking calls explore a few candidates (the table's or model's choice, MPI's own, the model's "
     "next best, chunk and transport neighbours), every rank deciding alike from the slowest rank's times, "
     "then settle; a settled choice that drifts is re-examined (docs/autotune.md); every rank must set the same")),
    ("LPMPI_AUTOTUNE_FILE", "path|none", ("with LPMPI_AUTOTUNE=1: the tuning table of learned rows; its rows "
     "start the run settled (a file of another MPI library, CPU model or MPI tuning variables, or a corrupt "
     "one: ignored, one warning) and what was learned at MPI_COMM_WORLD's size is merged into it at exit "
     "(rank 0); default the per-machine cache ~/.cache/lpmpi/autotune-P<P>-<hash>.json ($XDG_CACHE_HOME), "
     "none: no file; lpmpi-tune --merge folds it into a table")),
    ("LPMPI_TRACE", "directory", ("write every rank's collectives to directory/trace.<rank>.json (Chrome "
     "trace events: Perfetto, chrome://tracing) at exit; lpmpi-trace directory merges and summarises them "
     "(docs/debugging.md)")),
    ("LPMPI_TRACE_MAX", "calls", ("with LPMPI_TRACE: calls a rank records in full (default 100000); past "
     "them one call in 100 of each communicator")),
    ("LPMPI_FR_SIZE", "0..16777216", ("the flight recorder: the last calls each rank keeps, with their state "
     "(default 256; 0: off, and with it the SIGUSR1 dumps and LPMPI_ABORT_TIMEOUT)")),
    ("LPMPI_FR_DIR", "directory", ("where the flight recorder is dumped (fr.<rank>.json): by the watchdog, on "
     "SIGUSR1, by lpmpi.dump_flight_recorder(); default lpmpi-fr in the working directory; lpmpi-trace "
     "--hang directory says where the ranks diverged")),
    ("LPMPI_ABORT_TIMEOUT", "seconds", ("the watchdog of last resort: a collective not complete after this "
     "long dumps the flight recorder, says what it waits for and aborts the job (default 1800; 0: never); "
     "free (a thread that wakes every few seconds)")),
    ("LPMPI_SHM_SPIN_US", "-1..1000000", ("microseconds at most a waiting rank polls before it "
     "sleeps (the shared-memory transport's counters) or yields its core (MPI requests); an adaptive "
     "budget (default 50; -1: poll, never sleep nor yield)")),
)

_FALSE = ("", "0", "false", "no", "off")
#: LPMPI_NODE_TRANSPORT's values, in the engine's order of modes (lp_set_node_transport)
NODE_TRANSPORTS = ("mpi", "auto", "shm", "cma")


@dataclass(frozen=True)
class Settings:
    """The parsed environment (None / 0: not set, the engine's default)."""

    algorithm: str | None = None       # lower case; None for unset or "auto"
    chunk_bytes: int | None = None
    tuning_file: str | None = None     # as given ("none" disables tables)
    tables_as: str | None = None       # LPMPI_TABLES_AS: a shipped table whose machine to load as
    window: int = 0
    check: bool = False
    debug: bool = False
    staging_buffers: int = 0
    cuda_aware: int = -1               # -1 ask the MPI library, 0 staged, 1 aware
    emulate_staging: bool = False
    max_msg_bytes: int = 0
    progress_thread: bool = False
    node_transport: str = "auto"       # LPMPI_NODE_TRANSPORT: auto, shm, cma or mpi
    shm_spin_us: int | None = None     # LPMPI_SHM_SPIN_US: None = the engine's default
    timeout: float = 0.0               # LPMPI_TIMEOUT: seconds, 0 = off
    autotune: bool = False             # LPMPI_AUTOTUNE
    autotune_file: str | None = None   # LPMPI_AUTOTUNE_FILE (None: the per-machine cache; "none": no file)
    trace: str | None = None           # LPMPI_TRACE: directory
    trace_max: int = 0                 # LPMPI_TRACE_MAX (0: the engine's default)
    fr_size: int = 256                 # LPMPI_FR_SIZE
    fr_dir: str | None = None          # LPMPI_FR_DIR
    abort_timeout: float = 1800.0      # LPMPI_ABORT_TIMEOUT: seconds, 0 = never


def _caller_level() -> int:
    """The stacklevel of the first frame outside lpmpi and the import machinery, as seen from
    the warnings.warn call in _ignore: a warning points at the user's ``import lpmpi`` (or
    their call), not at this file."""
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    f, level = sys._getframe(2), 2          # the caller of _ignore: warn's level 2
    while f is not None:
        name = f.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name    # warn() does not count these
        if not (name.startswith(here) or internal):
            return level
        f, level = f.f_back, level + (not internal)
    return 2


def _ignore(name: str, value: str, why: str) -> None:
    warnings.warn(f"lpmpi: ignoring {name}={value!r} ({why})", stacklevel=_caller_level())


def _flag(env: Mapping[str, str], name: str) -> bool:
    """A 0|1 switch: "" and 0 off, 1 on (true/false, yes/no, on/off too, any case); anything
    else warns and leaves it off (the default of every switch)."""
    v = env.get(name, "").strip().lower()
    if v in _FALSE:
        return False
    if v in ("1", "true", "yes", "on"):
        return True
    _ignore(name, env[name], "not 0 or 1")
    return False


def _size(env: Mapping[str, str], name: str) -> int:
    v = env.get(name, "").strip()
    if not v:
        return 0
    try:
        n = int(v, 0) if v.lower().startswith("0x") else parse_size(v)
    except ValueError:
        n = 0
    if n <= 0:
        _ignore(name, v, "not a positive size such as 4096, 64K or 1MiB")
        return 0
    return n


def _ranged(env: Mapping[str, str], name: str, lo: int, hi: int) -> int:
    v = env.get(name, "").strip()
    if not v:
        return 0
    try:
        n = int(v, 0)
    except ValueError:
        n = lo - 1
    if not lo <= n <= hi:
        _ignore(name, v, f"not an integer in {lo}..{hi}")
        return 0
    return n


def read(env: Mapping[str, str] | None = None, algorithms: tuple[str, ...] = ()) -> Settings:
    """Parse ``env`` (default ``os.environ``); ``algorithms``: the names LPMPI_ALGORITHM may
    take (empty: any).  Bad values warn and are ignored."""
    env = os.environ if env is None else env
    alg = env.get("LPMPI_ALGORITHM", "").strip().lower() or None
    if alg == "auto":
        alg = None
    if alg is not None and algorithms and alg not in algorithms:
        _ignore("LPMPI_ALGORITHM", env["LPMPI_ALGORITHM"], f"unknown algorithm; one of {', '.join(algorithms)}")
        alg = None
    aware = env.get("LPMPI_CUDA_AWARE", "").strip()
    nt = env.get("LPMPI_NODE_TRANSPORT", "").strip().lower()
    if nt not in ("", *NODE_TRANSPORTS):
        _ignore("LPMPI_NODE_TRANSPORT", env["LPMPI_NODE_TRANSPORT"], f"not one of {', '.join(NODE_TRANSPORTS)}")
        nt = ""
    return Settings(
        algorithm=alg,
        chunk_bytes=_chunk(env),
        tuning_file=env.get("LPMPI_TUNING_FILE", "").strip() or None,
        tables_as=env.get("LPMPI_TABLES_AS", "").strip() or None,
        window=_ranged(env, "LPMPI_WINDOW", 1, _W),
        check=_flag(env, "LPMPI_CHECK"),
        debug=_flag(env, "LPMPI_DEBUG"),
        staging_buffers=_ranged(env, "LPMPI_STAGING_BUFFERS", 1, _S),
        cuda_aware=-1 if not aware else int(_flag(env, "LPMPI_CUDA_AWARE")),
        emulate_staging=_flag(env, "LPMPI_EMULATE_STAGING"),
        max_msg_bytes=_size(env, "LPMPI_MAX_MSG_BYTES"),
        progress_thread=_flag(env, "LPMPI_PROGRESS_THREAD"),
        node_transport=nt or "auto",
        shm_spin_us=_spin(env),
        timeout=_seconds(env, "LPMPI_TIMEOUT"),
        autotune=_flag(env, "LPMPI_AUTOTUNE"),
        autotune_file=env.get("LPMPI_AUTOTUNE_FILE", "").strip() or None,
        trace=env.get("LPMPI_TRACE", "").strip() or None,
        trace_max=_ranged(env, "LPMPI_TRACE_MAX", 1, 1 << 40),
        fr_size=_fr_size(env),
        fr_dir=env.get("LPMPI_FR_DIR", "").strip() or None,
        abort_timeout=_seconds(env, "LPMPI_ABORT_TIMEOUT", 1800.0, zero=True),
    )


def _chunk(env: Mapping[str, str]) -> int | None:
    n = _size(env, "LPMPI_CHUNK_BYTES")
    if n and n < engine.CHUNK_MIN:
        _ignore("LPMPI_CHUNK_BYTES", env["LPMPI_CHUNK_BYTES"], f"below the smallest chunk, {engine.CHUNK_MIN} bytes")
        return None
    return n or None


def _fr_size(env: Mapping[str, str]) -> int:
    v = env.get("LPMPI_FR_SIZE", "").strip()
    if v == "0":
        return 0
    return _ranged(env, "LPMPI_FR_SIZE", 1, 1 << 24) or 256


def _seconds(env: Mapping[str, str], name: str, default: float = 0.0, zero: bool = False) -> float:
    """Seconds in (0, 1e6] (zero: 0 too, meaning never); unset or bad: default."""
    v = env.get(name, "").strip()
    if not v:
        return default
    try:
        t = float(v)
    except ValueError:
        t = -1.0
    if zero and t == 0:
        return 0.0
    if not 0 < t <= 1e6:          # NaN fails the comparison too
        _ignore(name, v, "not a number of seconds in " + ("[0, 1e6] (0: never)" if zero else "(0, 1e6]"))
        return default
    return t


def _spin(env: Mapping[str, str]) -> int | None:
    v = env.get("LPMPI_SHM_SPIN_US", "").strip()
    if not v:
        return None
    try:
        n = int(v)
    except ValueError:
        n = -2
    if not -1 <= n <= 1_000_000:
        _ignore("LPMPI_SHM_SPIN_US", v, "not an integer in -1..1000000")
        return None
    return n


#: what :func:`apply` read at import
settings = Settings()


def apply() -> Settings:
    """Read the environment and configure the engine with it (once, at import of lpmpi)."""
    global settings
    from lpmpi import _core

    names = tuple(sorted({a for c in _core.COLLECTIVES for a in _core.algorithms(c)}))
    settings = s = read(algorithms=names)
    _core._configure(s.max_msg_bytes, s.window, s.check, s.debug)
    _core._configure_device(s.emulate_staging, s.cuda_aware, s.staging_buffers)
    _core._configure_node_transport(NODE_TRANSPORTS.index(s.node_transport))
    if s.shm_spin_us is not None:
        _core._configure_shm_spin(s.shm_spin_us)
    _core._configure_timeout(s.timeout)
    _core._configure_flight(s.fr_size, os.path.abspath(s.fr_dir) if s.fr_dir else "", s.abort_timeout)
    if s.trace:
        from lpmpi import trace

        trace.start(s.trace, s.trace_max)
    _core.set_autotune(s.autotune)
    for coll in _core.COLLECTIVES:
        # an algorithm that a collective lacks (ring for bcast) leaves that collective on auto
        _core.set_override(coll, s.algorithm if s.algorithm in _core.algorithms(coll) else None,
                           s.chunk_bytes)
    if s.progress_thread:
        try:
            _core.progress_thread(True)
        except Exception as exc:  # noqa: BLE001 - a warning, never a failed import
            warnings.warn(f"lpmpi: LPMPI_PROGRESS_THREAD=1 ignored: {exc}", RuntimeWarning, stacklevel=3)
    return s


def table_text() -> str:
    """The variables as a Markdown table (README.md, docs/api.md)."""
    lines = ["| variable | value | effect |", "|---|---|---|"]
    lines += [f"| `{n}` | {v.replace('|', chr(92) + '|')} | {w} |" for n, v, w in VARIABLES]
    return "\n".join(lines)
