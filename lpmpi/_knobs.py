"""The one table of lpmpi's knobs (its ``LPMPI_*`` environment variables), as NCCL's
``NCCL_PARAM`` and MPICH's CVAR blocks: each knob's name, type, range, default, the words of the
docs, the engine's setter, and whether every rank must set it alike.  Everything else reads it:

- :mod:`lpmpi._env` parses the environment by it (a bad value warns once and is ignored) and
  makes the README's and docs/api.md's table from it (``table_text``; tests/test_env.py checks
  both documents hold it);
- ``tools/gen_knobs.py`` writes ``src/include/knobs.h`` from it: the C side's defaults and limits
  (``LP_KNOB_<NAME>_DEFAULT``, ``_MIN``, ``_MAX``) and the list of knobs the ranks must agree on
  (``LP_KNOBS_AGREE``, which src/api/check.c's fingerprint and its error message are built from);
  tests/test_generated.py fails where the header differs from this table;
- ``lpmpi-info`` prints every knob's value in force and where it came from.

Pure data, importing nothing of lpmpi: the generator loads it by path, without a built engine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass(frozen=True)
class Knob:
    """One ``LPMPI_*`` variable.

    kind: how it parses: ``flag`` (0|1), ``int`` (in lo..hi), ``size`` (bytes: 4096, 64K,
    1MiB), ``seconds`` (in (0, hi], or 0 where ``zero``), ``choice`` (one of ``choices``),
    ``name`` (an algorithm), ``text`` (a path, a directory, a file name).
    field: its attribute of :class:`lpmpi._env.Settings`; default: its value there when unset
    (what is in force); value: the docs' "value" column; doc: the docs' "effect" column.
    c_name: the suffix of its C macros in knobs.h (``LP_KNOB_<c_name>_DEFAULT`` ...), or None
    where C has no default of its own for it; setter: the engine's function that receives it
    (``lpmpi._core``, called by ``_env.apply``).  agree: every rank must set it alike: a
    communicator's first call compares it across the ranks (src/api/check.c): c_value is then the C
    expression of its value in force, c_text how check.c prints it (``int``, ``tristate``:
    -1 unset, ``ns``: nanoseconds as seconds, 0 off).
    """

    name: str
    field: str
    kind: str
    value: str
    doc: str
    default: object = None
    lo: Optional[float] = None
    hi: Optional[float] = None
    zero: bool = False
    choices: Tuple[str, ...] = ()
    c_name: Optional[str] = None
    setter: str = ""
    agree: bool = False
    c_value: str = ""
    c_text: str = "int"


WINDOW_MAX = 64        # chunks in flight per direction at most (knobs.h: LP_KNOB_WINDOW_MAX)
STAGING_MAX = 64       # staging buffers per direction at most

#: LPMPI_NODE_TRANSPORT's values, in the engine's order of modes (lp_set_node_transport)
NODE_TRANSPORTS = ("mpi", "auto", "shm", "cma")

KNOBS: Tuple[Knob, ...] = (
    Knob("LPMPI_ALGORITHM", "algorithm", "name", "name",
         'force "auto" to one algorithm (lp, mst, be, ring, pairwise, linear, native; any case); a '
         "collective lacking it stays on auto", setter="set_override", agree=True),
    Knob("LPMPI_CHUNK_BYTES", "chunk_bytes", "size", "size",
         "force the chunk size of chunked algorithms (1K at least: 1K, 64K, 1MiB, ...; smaller values "
         "warn and are ignored)", lo=1024, setter="set_override", agree=True),
    Knob("LPMPI_TUNING_FILE", "tuning_file", "text", "path[:path...]|none",
         "load these tuning tables instead of the shipped ones; none: no table"),
    Knob("LPMPI_TABLES_AS", "tables_as", "text", "table file",
         "load the shipped tables as they apply on the machine this shipped table (a file name in "
         "lpmpi/tables, or a path) was measured on: its MPI library and CPU model, whatever this "
         "machine's (tests: every shipped table's decisions on any machine); every rank must set the same"),
    Knob("LPMPI_WINDOW", "window", "int", f"1..{WINDOW_MAX}",
         "chunks in flight per direction of the pipelines (default 4)", default=4, lo=1, hi=WINDOW_MAX,
         c_name="WINDOW", setter="_configure", agree=True, c_value="lp_window"),
    Knob("LPMPI_CHECK", "check", "flag", "0|1",
         "check on every call that all ranks agree (count, dtype, op, root, algorithm, chunk): "
         "MismatchError instead of a hang; other values warn and are ignored, as for every 0|1 switch",
         default=False, setter="_configure", agree=True, c_value="lp_check_enabled"),
    Knob("LPMPI_DEBUG", "debug", "flag", "0|1",
         "print on every rank each choice of auto (once per collective and size, naming the rank) and "
         "the source file:line of every error", default=False, setter="_configure"),
    Knob("LPMPI_STAGING_BUFFERS", "staging_buffers", "int", f"1..{STAGING_MAX}",
         "staging buffers per direction of the staged device pipeline (default 4)", default=4, lo=1,
         hi=STAGING_MAX, c_name="STAGING_BUFFERS", setter="_configure_device", agree=True,
         c_value="lp_staging"),
    Knob("LPMPI_CUDA_AWARE", "cuda_aware", "flag", "0|1",
         "device memory: force the transport (1: the MPI library reads device memory, 0: staged "
         "through the host); unset: ask the library", default=-1, setter="_configure_device",
         agree=True, c_value="lp_device_aware()", c_text="tristate"),
    Knob("LPMPI_EMULATE_STAGING", "emulate_staging", "flag", "0|1",
         "emulate the staged device path on the host (every buffer is treated as device memory; tests)",
         default=False, setter="_configure_device", agree=True, c_value="lp_device_emulated()"),
    Knob("LPMPI_MAX_MSG_BYTES", "max_msg_bytes", "size", "size",
         "largest single MPI message (bigger transfers are split; tests)", default=1 << 30,
         c_name="MAX_MSG_BYTES", setter="_configure", agree=True, c_value="(int64_t)lp_max_msg_bytes"),
    Knob("LPMPI_PROGRESS_THREAD", "progress_thread", "flag", "0|1",
         "start the background progress thread at import: it advances nonblocking and persistent "
         "requests while the program computes (needs MPI_THREAD_MULTIPLE)", default=False,
         setter="progress_thread"),
    Knob("LPMPI_NODE_TRANSPORT", "node_transport", "choice", "auto|shm|cma|mpi",
         "between ranks of one node, for the ring allreduce, allgather and reduce_scatter: auto "
         "(default) uses lpmpi's shared-memory transport and single-copy process_vm_readv reads, each "
         "at the sizes where it measured faster (either alone where the other cannot work); shm or cma "
         "only that one; mpi keeps MPI point-to-point", default="auto", choices=NODE_TRANSPORTS,
         setter="_configure_node_transport"),
    Knob("LPMPI_TIMEOUT", "timeout", "seconds", "seconds",
         "the watchdog: a collective not complete after this long raises LPError on the ranks waiting "
         "for it, naming what it waits for (the communicator is unusable then: e.g. comm.Abort()); "
         "default off, free when off; on, waits poll instead of blocking in MPI", default=0.0, hi=1e6,
         setter="_configure_timeout", agree=True, c_value="lp_timeout_ns", c_text="ns"),
    Knob("LPMPI_AUTOTUNE", "autotune", "flag", "0|1",
         'tune "auto" while the program runs: per communicator, collective and size class, blocking '
         "calls explore a few candidates (the table's or model's choice, MPI's own, the model's next "
         "best, chunk and transport neighbours), every rank deciding alike from the slowest rank's "
         "times, then settle; a settled choice that drifts is re-examined (docs/autotune.md); every "
         "rank must set the same", default=False, setter="set_autotune", agree=True,
         c_value="lp_autotune"),
    Knob("LPMPI_AUTOTUNE_FILE", "autotune_file", "text", "path|none",
         "with LPMPI_AUTOTUNE=1: the tuning table of learned rows; its rows start the run settled (a "
         "file of another MPI library, CPU model or MPI tuning variables, or a corrupt one: ignored, "
         "one warning) and what was learned at MPI_COMM_WORLD's size is merged into it at exit (rank "
         "0); default the per-machine cache ~/.cache/lpmpi/autotune-P<P>-<hash>.json "
         "($XDG_CACHE_HOME), none: no file; lpmpi-tune --merge folds it into a table"),
    Knob("LPMPI_TRACE", "trace", "text", "directory",
         "write every rank's collectives to directory/trace.<rank>.json (Chrome trace events: "
         "Perfetto, chrome://tracing) at exit; lpmpi-trace directory merges and summarises them "
         "(docs/debugging.md)", setter="trace.start"),
    Knob("LPMPI_TRACE_MAX", "trace_max", "int", "calls",
         "with LPMPI_TRACE: calls a rank records in full (default 100000); past them one call in 100 "
         "of each communicator", default=100000, lo=1, hi=1 << 40, c_name="TRACE_MAX",
         setter="trace.start"),
    Knob("LPMPI_FR_SIZE", "fr_size", "int", "0..16777216",
         "the flight recorder: the last calls each rank keeps, with their state (default 256; 0: off, "
         "and with it the SIGUSR1 dumps and LPMPI_ABORT_TIMEOUT)", default=256, lo=0, hi=1 << 24,
         c_name="FR_SIZE", setter="_configure_flight"),
    Knob("LPMPI_FR_DIR", "fr_dir", "text", "directory",
         "where the flight recorder is dumped (fr.<rank>.json): by the watchdog, on SIGUSR1, by "
         "lpmpi.dump_flight_recorder(); default lpmpi-fr in the working directory; lpmpi-trace --hang "
         "directory says where the ranks diverged", setter="_configure_flight"),
    Knob("LPMPI_ABORT_TIMEOUT", "abort_timeout", "seconds", "seconds",
         "the watchdog of last resort: a collective not complete after this long dumps the flight "
         "recorder, says what it waits for and aborts the job (default 1800; 0: never); free (a thread "
         "that wakes every few seconds)", default=1800.0, hi=1e6, zero=True, c_name="ABORT_TIMEOUT",
         setter="_configure_flight"),
    Knob("LPMPI_SHM_SPIN_US", "shm_spin_us", "int", "-1..1000000",
         "microseconds at most a waiting rank polls before it sleeps (the shared-memory transport's "
         "counters) or yields its core (MPI requests); an adaptive budget (default 50; -1: poll, never "
         "sleep nor yield)", default=50, lo=-1, hi=1_000_000, c_name="SHM_SPIN_US",
         setter="_configure_shm_spin"),
    Knob("LPMPI_TUNER_FAKE_DEVICE", "tuner_fake_device", "flag", "0|1",
         "tests: lpmpi-bench's and lpmpi-tune's --memory cuda on host arrays lpmpi treats as device "
         "memory (with LPMPI_EMULATE_STAGING=1), where there is no GPU; read at each use",
         default=False),
)

#: {name: knob}
BY_NAME = {k.name: k for k in KNOBS}
