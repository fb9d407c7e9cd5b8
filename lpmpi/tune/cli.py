"""``lpmpi-tune``: tune lpmpi's "auto" for this machine and write a tuning table (run under mpiexec).

    mpiexec -n 2 lpmpi-tune --collectives allreduce,bcast,reduce --min-bytes 8 --max-bytes 64MiB \\
        --storage sqlite:///tune.db --out table.json

``--memory cuda`` tunes device memory (CuPy arrays, one GPU per rank of a node; the table is
for memory "cuda").  Where MPI is not CUDA-aware, so that lpmpi stages device buffers through
the host, chunked algorithms get one more dimension: the staging buffers (``--staging-buffers``).
On host memory, where the ranks of a node have more than one node-local transport, the
algorithms that run over one (the ring allreduce) get one more dimension: the transport
(``--transports``), and the table's rows name the one chosen.

Rerunning the same command after an interruption resumes: finished trials are kept in the
storage and never measured again.  It needs Optuna (``pip install 'lpmpi[tune]'``; ``--help``
works without it) and more than one process (``--allow-single`` to tune one anyway).  Exit
status: 0 done (table written), 2 bad usage (also: Optuna missing, or one process), 3 stopped
by --max-trials-this-run (rerun to go on), 130 interrupted.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from mpi4py import MPI

import lpmpi
from lpmpi import engine, model, tables
from lpmpi.bench import (
    Parser,
    add_allow_single,
    add_flag,
    device_problem,
    node_transports,
    refuse_single,
    resolve_dtype,
    size_arg,
    sizes_arg,
)
from lpmpi.engine import COLLECTIVES, OPS
from lpmpi.tune.driver import Settings, StopRun, Tuner
from lpmpi.tune.report import BucketResult, Progress, summary
from lpmpi.tune.space import STAGING_CHOICES

EXIT_USAGE, EXIT_STOPPED, EXIT_INTERRUPTED = 2, 3, 130


def size_ladder(lo: int, hi: int, factor: float) -> list[int]:
    """``lo, lo*f, lo*f^2, ...`` up to ``hi`` (included), as whole bytes.

    >>> size_ladder(8, 64, 2)
    [8, 16, 32, 64]
    """
    if not (1 <= lo <= hi) or not factor > 1:
        raise ValueError(f"need 1 <= min-bytes <= max-bytes and a step > 1 (got {lo}, {hi}, {factor})")
    out, x = [], float(lo)
    while round(x) < hi:
        out.append(round(x))
        x *= factor
    return sorted(set(out + [hi]))


def _int_list(text: str) -> list[int]:
    try:
        return [int(t, 0) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of ints: {text!r}") from None


class HelpFormatter(argparse.HelpFormatter):
    """Help that ends each option's text with its default, once: not where the text already
    names it, nor for options whose default is "none" (None, False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS or not action.option_strings):
            return text
        return text + " (default: %(default)s)"


def _list_text(values: Sequence[Any]) -> str:
    return ",".join(map(str, values))


def _name_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def build_parser(quiet: bool = False) -> argparse.ArgumentParser:
    """The command line (``quiet`` silences it on ranks other than 0)."""
    p = Parser(prog="lpmpi-tune", description=__doc__.splitlines()[0].replace("``", ""), quiet=quiet,
               formatter_class=HelpFormatter,
               epilog="Needs Optuna (pip install 'lpmpi[tune]') and mpiexec. Rerunning the same command "
               "after an interruption resumes. Exit status: 0 done, 2 bad usage (Optuna missing, one "
               "process), 3 stopped by --max-trials-this-run, 130 interrupted.")
    p.add_argument("--collectives", default=list(COLLECTIVES), metavar="LIST", type=_name_list,
                   help=f"comma-separated collectives to tune (default: {_list_text(COLLECTIVES)})")
    p.add_argument("--min-bytes", type=size_arg, default=8, metavar="SIZE",
                   help="smallest message size tuned, binary units (8, 1K, 64KiB)")
    p.add_argument("--max-bytes", type=size_arg, default=64 << 20, metavar="SIZE",
                   help="largest message size tuned (default: 64MiB)")
    p.add_argument("--step", type=float, default=2.0, help="factor between tuned sizes")
    p.add_argument("--sizes", type=sizes_arg, metavar="SIZES",
                   help="explicit sizes instead of min/max/step: a list and/or lo:hi[:xF] ranges, "
                   "e.g. 8,1K,1M")
    p.add_argument("--trials", type=int, help="configurations measured per bucket besides the native "
                   "baseline (default: a quarter of the exhaustive grid, rounded up)")
    p.add_argument("--storage", default="sqlite:///lpmpi-tune.db",
                   help="Optuna storage URL (resume, optuna-dashboard); 'memory' for none")
    p.add_argument("--out", metavar="PATH", help="table to write (default: lpmpi-table-P<P>.json)")
    p.add_argument("--seed", type=int, default=0, help="TPE sampler seed")
    p.add_argument("--dtype", default="float32", help="numpy dtype of the buffers")
    p.add_argument("--acc-dtype", default=None, choices=["float32"],
                   help="tune calls with acc_dtype (float16/bfloat16 data, sum or avg, host memory, "
                   "allreduce and reduce): their own study and a table that applies to them only")
    p.add_argument("--op", default="sum", type=str.lower, choices=OPS, help="reduction op")
    p.add_argument("--root", type=int, default=0, help="root rank of reduce and bcast")
    p.add_argument("--memory", default="host", choices=list(engine.MEMORY_KINDS),
                   help="where the buffers live (cuda: CuPy arrays on this rank's GPU)")
    p.add_argument("--staging-buffers", type=_int_list, default=list(STAGING_CHOICES), metavar="LIST",
                   help="--memory cuda, MPI not CUDA-aware: the staging buffers tried for chunked "
                   f"algorithms (each 1..{engine.STAGING_MAX}; chunks in flight per direction of the staged pipeline; "
                   f"default: {_list_text(STAGING_CHOICES)})")
    p.add_argument("--transports", type=_name_list, metavar="LIST",
                   help="host memory: the node-local transports tried for the algorithms that run over "
                   f"one (the ring allreduce), of {_list_text(engine.TRANSPORTS)} (default: all this "
                   "communicator has; no such dimension where it has one only)")
    p.add_argument("--shm-below", type=size_arg, metavar="SIZE",
                   help="search the shared-memory transport only below this message size (e.g. 3MiB): "
                   "where its speed depends on where the host runs the ranks' cores, a tuning run in "
                   "a good spell would pick it for sizes where it can lose 7x in a bad one "
                   "(docs/performance-archive.md); default: every size")
    p.add_argument("--shared-core", type=float, default=0.05, metavar="TOL",
                   help="host memory, one node: each size's choice and the finalists within TOL of "
                   "its time (0.05: 5%%) measured again with every rank on one core (the placement a "
                   "busy process beside the job gives), and the fastest there of those taken where it "
                   "is more than 3%% faster there; configurations that synchronise often lose most "
                   "on a shared core (default 0.05; 0: off)")
    p.add_argument("--fresh-input", action=argparse.BooleanOptionalAction, default=True,
                   help="rewrite each call's input before it, untimed, as an application writes its "
                   "input before each call (default); --no-fresh-input times calls on an unchanged "
                   "input, which can favour transports that find it still in a peer's caches")
    p.add_argument("--warmup", type=int, default=2,
                   help="warm-up repetitions (not counted) before each trial's timed ones")
    p.add_argument("--min-reps", type=int, default=5, help="fewest timed repetitions per trial")
    p.add_argument("--max-reps", type=int, default=50, help="most timed repetitions per trial")
    p.add_argument("--min-time", type=float, default=0.05,
                   help="seconds of timed calls per trial (sizes the repetitions within min..max)")
    p.add_argument("--checkpoint-reps", type=int, default=3,
                   help="repetitions after which a trial far slower than the best is pruned (0: never)")
    p.add_argument("--prune-factor", type=float, default=1.5,
                   help="prune a trial slower than this factor times the best trial at the checkpoint")
    p.add_argument("--verify-rounds", type=int, default=3,
                   help="final check: the best --verify-top configurations and native re-measured "
                   "side by side, call by call interleaved, this many times a trial's repetitions "
                   "each (0: off; the study's own times decide)")
    p.add_argument("--verify-top", type=int, default=3,
                   help="configurations of the study that go into the final check")
    p.add_argument("--verify-passes", type=int, default=2,
                   help="moments at which each size's finalists are measured: the first right after "
                   "its trials, the others after every size is tuned; the choice goes by each "
                   "finalist's worse time (1: no final check)")
    add_flag(p, "--fit-model", True, "fit alpha, beta, gamma first (warm start; stored in the table)")
    p.add_argument("--max-trials-this-run", type=int, metavar="N", help="stop after N trials (exit 3)")
    p.add_argument("--allow-oversubscribe", action="store_true",
                   help="tune even with more ranks on a node than cores (timings are meaningless)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--merge", metavar="AUTOTUNE_FILE",
                   help="fold an LPMPI_AUTOTUNE_FILE's rows into the table --into (for its process count, "
                   "memory kind and nodes) and write --out; one process, no measurement, no Optuna")
    p.add_argument("--into", metavar="TABLE", help="the table --merge folds into")
    add_allow_single(p)
    p.add_argument("--crash-after", type=int, help=argparse.SUPPRESS)
    return p


def _settings(p: argparse.ArgumentParser, a: argparse.Namespace, nprocs: int) -> Settings:
    bad = [c for c in a.collectives if c not in COLLECTIVES]
    if bad or not a.collectives:
        p.error(f"--collectives: unknown {bad} (choose from {', '.join(COLLECTIVES)})")
    try:
        sizes = a.sizes or size_ladder(a.min_bytes, a.max_bytes, a.step)
        dtype = resolve_dtype(a.dtype)
    except ValueError as exc:
        p.error(str(exc))
    if not 0 <= a.root < nprocs:
        p.error(f"--root {a.root} is out of range for {nprocs} processes")
    if a.acc_dtype:
        if dtype.name not in ("float16", "bfloat16") or a.op not in ("sum", "avg") or a.memory != "host":
            p.error("--acc-dtype float32 needs --dtype float16 or bfloat16, --op sum or avg and host "
                    f"memory (got {dtype.name}, {a.op}, {a.memory})")
        plain = [c for c in a.collectives if not engine.collective_info(c).takes_acc_dtype]
        if plain:
            why = "; ".join(f"{c} {'has no reduction' if not engine.collective_info(c).has_op else 'takes no acc_dtype yet'}"
                            for c in plain)
            p.error(f"--acc-dtype: {why}; use --collectives "
                    + ",".join(c for c in engine.COLLECTIVES if engine.collective_info(c).takes_acc_dtype))
    out_dir = os.path.dirname(os.path.abspath(a.out or "."))
    if not os.access(out_dir, os.W_OK):
        p.error(f"--out: cannot write into {out_dir}")
    for name in ("trials", "min_reps", "max_trials_this_run", "verify_top", "verify_passes"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 0 <= a.shared_core <= 1:
        p.error(f"--shared-core must be in 0..1, got {a.shared_core}")
    if a.max_reps < a.min_reps or a.warmup < 0 or a.checkpoint_reps < 0 or a.prune_factor <= 1:
        p.error("need --max-reps >= --min-reps, --warmup >= 0, --checkpoint-reps >= 0, --prune-factor > 1")
    if not a.staging_buffers or not all(1 <= w <= engine.STAGING_MAX for w in a.staging_buffers):
        p.error(f"--staging-buffers: need one or more ints in 1..{engine.STAGING_MAX}, got {a.staging_buffers}")
    if a.transports is not None:
        bad = [t for t in a.transports if t not in engine.TRANSPORTS]
        if bad or not a.transports:
            p.error(f"--transports: unknown {', '.join(bad) or '(none given)'} "
                    f"(known: {', '.join(engine.TRANSPORTS)})")
        if a.memory != "host":
            p.error("--transports applies to host memory")
    return Settings(a.collectives, sizes, dtype, a.op, a.root, a.memory, a.storage, a.seed, a.trials,
                    a.warmup, a.min_reps, a.max_reps, a.min_time, a.checkpoint_reps, a.prune_factor,
                    a.verify_rounds, a.max_trials_this_run, a.crash_after, verify_top=a.verify_top,
                    verify_passes=a.verify_passes, acc_dtype=a.acc_dtype, fresh_input=a.fresh_input,
                    shared_core=a.shared_core if a.memory == "host" else 0.0)


def transport_dimension(have: Sequence[str], asked: Sequence[str] | None) -> tuple[tuple[str, ...], str]:
    """The transports searched (in ``have``'s order) of those the communicator has (``have``)
    and those ``--transports`` asks for (None: all), and a note saying so; none where the
    communicator has one transport only or has none of those asked for.

    >>> transport_dimension(("mpi", "shm", "cma"), None)[0], transport_dimension(("mpi",), None)[0]
    (('mpi', 'shm', 'cma'), ())
    >>> transport_dimension(("mpi", "cma"), ["shm", "cma"])
    (('cma',), 'mpi,cma here; searched: cma (not here: shm)')
    """
    lacking = [t for t in asked or () if t not in have]
    searched = tuple(t for t in have if asked is None or t in asked) if len(have) > 1 else ()
    note = f"{_list_text(have)} here; " + (f"searched: {_list_text(searched)}" if searched
                                           else "no transport dimension")
    return searched, note + (f" (not here: {_list_text(lacking)})" if lacking else "")


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _oversubscribed(comm: Any, fp: dict[str, Any]) -> str | None:
    cores = comm.allreduce(_usable_cores(), op=MPI.MIN)
    if fp["ranks_per_node"] > max(cores, os.cpu_count() or 1):
        return (f"{fp['ranks_per_node']} ranks per node but {cores} usable cores: timings of an "
                "oversubscribed run are meaningless (--allow-oversubscribe to tune anyway)")
    return None


def command_line(argv: Sequence[str], nprocs: int) -> str:
    """The command as one would type it again."""
    return f"mpiexec -n {nprocs} lpmpi-tune {shlex.join(argv)}".rstrip()


def table_for(results: Sequence[BucketResult], fp: dict[str, Any], fitted: model.Model | None,
              settings: dict[str, Any], command: str) -> dict[str, Any]:
    """The JSON document of the tuned table."""
    rows = []
    for coll in dict.fromkeys(r.collective for r in results):
        chunked = engine.chunked(coll)
        choices = [tables.Choice(r.nbytes, r.choice.algorithm, r.choice.chunk_bytes, r.seconds, r.native_s,
                                 r.choice.staging_buffers, r.choice.transport, r.one_core_s)
                   for r in results if r.collective == coll]
        rows += tables.merge_choices(coll, choices, chunked)
    tuner = {"command": command, "settings": settings, "lpmpi_version": lpmpi.__version__,
             "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
             "buckets": [{"collective": r.collective, "nbytes": r.nbytes, "measured": r.measured,
                          "budget": r.budget, "grid": r.grid, "pruned": r.pruned} for r in results]}
    doc = tables.table_document(fp, rows, tuner)
    if fitted is not None:
        doc["model"] = {"alpha": fitted.alpha, "beta": fitted.beta, "gamma": fitted.gamma}
        if fp.get("nodes", 1) > 1 and fitted.alpha_net is not None:     # measured across nodes
            doc["model"].update(alpha_net=fitted.alpha_net, beta_net=fitted.beta_net)
    return doc


OPTUNA_MISSING = "lpmpi-tune needs Optuna, which is not installed here: pip install 'lpmpi[tune]'" \
    " (in a checkout: pip install '.[tune]')"


def optuna_problem() -> str | None:
    """None where Optuna imports (its logging then quieted), else the one line that says how
    to install it."""
    try:
        import optuna
    except ImportError:
        return OPTUNA_MISSING
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return None


def approx_bytes(n: float) -> str:
    """A byte count to three digits: ``6 B``, ``1.41 KiB``, ``90.5 MiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{int(n)} B"


def table_hint(out: str, rows: Sequence[tables.Row], collectives: Sequence[str], nprocs: int,
               memory: str, acc: bool = False) -> list[str]:
    """The closing lines, once the table is written: what it covers, and how to use it, saying
    that LPMPI_TUNING_FILE replaces the shipped tables (whatever this table does not cover goes
    to the cost model, not to a shipped table).

    >>> rows = tables.merge_choices("allreduce", [tables.Choice(1024, "lp", 1024, 1e-6, 2e-6),
    ...                                           tables.Choice(4096, "be", None, 1e-6, 2e-6)],
    ...                             {"lp": True, "be": False})
    >>> print("\\n".join(table_hint("t.json", rows, ["allreduce"], 2, "host")))
    # wrote t.json: P = 2, host memory; allreduce [512 B, 8 KiB)
    # use it: LPMPI_TUNING_FILE=t.json mpiexec -n 2 ..., or copy it into lpmpi/tables/ and reinstall
    # LPMPI_TUNING_FILE replaces every shipped table: what this one lacks (reduce, bcast; other sizes; other P) goes to the cost model
    """
    span = tables.covered(rows)
    what = "; ".join(f"{c} [{approx_bytes(span[c][0])}, {approx_bytes(span[c][1])})"
                     for c in collectives if c in span)
    lacks = ", ".join(c for c in engine.COLLECTIVES if c not in span)
    kind = memory + (" memory, calls with acc_dtype" if acc else " memory")
    return [f"# wrote {out}: P = {nprocs}, {kind}; {what}",
            (f"# use it: {tables.ENV_FILE}={out} mpiexec -n {nprocs} ..., or copy it into lpmpi/tables/ "
             "and reinstall"),
            (f"# {tables.ENV_FILE} replaces every shipped table: what this one lacks "
             f"({lacks + '; ' if lacks else ''}other sizes; other P) goes to the cost model")]


def _merge(parser: Any, args: Any, rank: int) -> int:
    """``--merge FILE --into TABLE --out OUT``: what the online tuner learned, folded in."""
    from lpmpi import autotune

    if not args.into or not args.out:
        parser.error("--merge needs --into TABLE and --out PATH")
    if rank == 0:
        try:
            folded, total = autotune.merge(args.merge, args.into, args.out)
        except (OSError, tables.TableError) as exc:
            print(f"lpmpi-tune --merge: {exc}", file=sys.stderr, flush=True)
            return EXIT_USAGE
        print(f"lpmpi-tune --merge: {folded} row(s) of {args.merge} folded into {args.into}: "
              f"{args.out} ({total} rows)", flush=True)
    return 0


def _run(comm: Any, argv: list[str]) -> int:
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    parser = build_parser(quiet=rank != 0)
    args = parser.parse_args(argv)
    if args.merge:
        return _merge(parser, args, rank)
    s = _settings(parser, args, nprocs)
    refused = refuse_single("lpmpi-tune", nprocs, args.allow_single)
    if refused is not None:
        return refused
    missing = optuna_problem()
    if missing:
        if rank == 0:
            print(missing, file=sys.stderr, flush=True)
        return EXIT_USAGE
    say = (lambda text: print(text, flush=True)) if rank == 0 else (lambda text: None)
    if s.memory == "cuda":
        # every rank checks its own process; any rank's problem stops all of them
        problems = [f"rank {r}: {why}" for r, why in enumerate(comm.allgather(device_problem())) if why]
        if problems:
            parser.error("; ".join(problems[:4]) + (" ..." if len(problems) > 4 else ""))
        info = engine.device_info()
        if info["transport"] == "staged":
            s.staging_choices = tuple(sorted(set(args.staging_buffers)))
        say(f"# device memory: transport {info['transport']}"
            + (f", staging buffers tried for chunked algorithms: {list(s.staging_choices)}"
               if s.staging_choices else " (no staging dimension)")
            + (" [emulated on the host]" if info["emulated"] else ""))
    else:
        s.transports, note = transport_dimension(node_transports(comm), args.transports)
        s.shm_below = args.shm_below if "shm" in s.transports else None
        say(f"# node-local transports: {note}"
            + (f"; shared memory only below {args.shm_below} B" if s.shm_below else ""))
    fp = tables.fingerprint(comm, s.memory)
    if s.acc_dtype:
        fp["acc_dtype"] = s.acc_dtype     # the table applies to acc_dtype calls only
    why = None if args.allow_oversubscribe else _oversubscribed(comm, fp)
    if why:
        say(f"lpmpi-tune: {why}")
        return EXIT_USAGE
    fitted = model.fit(comm) if args.fit_model else None
    if fitted is not None:
        say(f"# model fitted on this machine: {fitted}")
    progress = Progress(rank == 0 and not args.quiet)
    tuner = Tuner(comm, s, progress, fp["mpi_library"], say)
    try:
        results = tuner.run()
    except StopRun:
        say(f"# stopped after {args.max_trials_this_run} trials (--max-trials-this-run); "
            "rerun the same command to resume")
        return EXIT_STOPPED
    except KeyboardInterrupt:
        if rank == 0:
            try:
                tuner.abandon()   # the running trial marked FAIL and queued again: a rerun repeats it
            except Exception as exc:  # noqa: BLE001 - the rerun's open fails it anyway
                say(f"# could not mark the running trial failed ({type(exc).__name__}: {exc}); "
                    "the rerun will, when it opens the study")
        raise
    for line in summary(results):       # the final choices: tuner.run ended with the final check
        say(line)
    if rank == 0:
        out = args.out or f"lpmpi-table-P{nprocs}.json"
        settings = {k: (v.name if k == "dtype" else v) for k, v in vars(s).items()}
        doc = table_for(results, fp, fitted, settings, command_line(argv, nprocs))
        tables.write_table(out, doc)
        sys.stderr.flush()              # the progress lines (stderr) before the closing ones
        rows = tables.parse_table(doc).rows
        for line in table_hint(out, rows, s.collectives, nprocs, s.memory, bool(s.acc_dtype)):
            say(line)
    return 0


def interrupted(comm: Any, grace_s: float = 2.0) -> int:
    """Ctrl-C (SIGINT) on any rank: say how to resume and end every rank at once with
    ``MPI_Abort(130)``, since the other ranks wait in a collective (a broadcast from rank 0, a
    barrier) that would never complete.  A rank other than 0 waits ``grace_s`` first, so that
    rank 0, when it was interrupted too, has marked its running trial in the storage.  The
    finished trials are in the storage already; a rerun of the same command resumes."""
    if comm.Get_rank() == 0:
        print("\n# interrupted; rerun the same command to resume", flush=True)
    elif comm.Get_size() > 1:
        time.sleep(grace_s)
    sys.stdout.flush()
    sys.stderr.flush()
    if comm.Get_size() > 1:
        comm.Abort(EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lpmpi-tune`` / ``python -m lpmpi.tune``; returns the exit status.
    Optuna is imported once the arguments are parsed and checked: ``--help`` and usage errors
    work without it, and a run without it ends with one line saying how to install it."""
    comm = MPI.COMM_WORLD
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(comm, argv)
    except SystemExit as exc:   # argparse errors: every rank parsed the same arguments
        return int(exc.code or 0)
    except KeyboardInterrupt:
        return interrupted(comm)
    except Exception:  # noqa: BLE001 - one rank failing must not leave the others hanging
        traceback.print_exc()
        sys.stderr.flush()
        if comm.Get_size() > 1:
            comm.Abort(1)
        return 1

