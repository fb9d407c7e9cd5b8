"""Launch spread: run ``python -m lpmpi.bench`` in N fresh ``mpiexec`` launches, every other one
with each rank pinned to a core, and show how much each figure moves from launch to launch.

A speed claim of this project holds only if it holds over at least 8 fresh launches, half of
them pinned (docs/performance.md, "Launch spread").  This runs them one after the other and
aggregates their JSON; run it directly, not under ``mpiexec`` (it starts ``mpiexec`` itself)::

    python -m lpmpi.bench.launches --launches 8 -n 2 --json spread.json \\
        -- --sizes 1M,64M --algorithms auto,native --no-bandwidth

Everything after ``--`` goes to ``lpmpi.bench`` (not ``--json``: each launch writes its own).
Launch 0 is unpinned, 1 pinned, 2 unpinned, ...  ``--pin auto`` reads ``mpiexec --version``:
MPICH's hydra pins with ``-bind-to core``; Open MPI with ``--bind-to core`` (its unpinned
launches get ``--bind-to none``, as it binds by default at small P); Intel MPI pins by default
(``I_MPI_PIN=1``), so its unpinned launches set ``I_MPI_PIN=0``.  ``--pin=FLAGS`` gives the
pinned launches' mpiexec flags instead.  ``--busy`` keeps one more process spinning (a Python
busy loop) through each launch, to see a claim under load.

One line per launch as it ends, then per collective a table of each launch's time per size and
algorithm (the bench's median over repetitions of the slowest rank) with min / median / max over
launches and the spread max/min, and, where ``native`` was measured, each launch's speed-up
native time / algorithm time (> 1: faster than native) with its min / median / max.

Exit status: 0; 1 if any launch failed (non-zero exit, timeout, no JSON); 2 bad usage.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lpmpi._units import chunk_label, format_bytes
from lpmpi.tables import cpu_model

PROG = "python -m lpmpi.bench.launches"
DEFAULT_LAUNCHES = 8
DEFAULT_TIMEOUT = 600.0
TAIL_LINES = 25           # output lines of a failed launch kept (printed and in the JSON)
BUSY_LOOP = "while True: pass"
NATIVE, AUTO = "native", "auto"
SOURCE_ROOT = str(Path(__file__).resolve().parents[2])   # the directory holding this lpmpi

Key = tuple[str, int, int, str]   # (collective, nprocs, nbytes, label)


# ----------------------------------------------------------------------------- the launcher


@dataclass(frozen=True)
class Launcher:
    """Which MPI's mpiexec this is: ``kind`` is mpich, openmpi, intel or unknown; ``version``
    the line of ``mpiexec --version`` that says so."""

    kind: str
    version: str


def detect_launcher(text: str) -> Launcher:
    """The launcher from the output of ``mpiexec --version``.

    >>> detect_launcher("HYDRA build details:\\n    Version:   5.0.2\\n")
    Launcher(kind='mpich', version='MPICH hydra 5.0.2')
    >>> detect_launcher("mpirun (Open MPI) 4.1.5\\n\\nReport bugs to ...").kind
    'openmpi'
    >>> detect_launcher("Intel(R) MPI Library for Linux* OS, Version 2021.13 Build 2024").kind
    'intel'
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if re.search(r"Intel\(R\) MPI|Intel MPI", text):
        return Launcher("intel", first)
    if re.search(r"Open MPI|OpenRTE|Open RTE", text):
        return Launcher("openmpi", first)
    if re.search(r"HYDRA|MPICH", text):
        m = re.search(r"^\s*Version:\s*(\S+)", text, re.MULTILINE)
        return Launcher("mpich", f"MPICH hydra {m.group(1)}" if m else first)
    return Launcher("unknown", first)


def query_launcher(mpiexec: str) -> Launcher:
    """Run ``mpiexec --version`` (10 s at most) and detect the launcher."""
    try:
        p = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=10,
                           stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Launcher("unknown", f"({mpiexec} --version: {exc})")
    return detect_launcher(p.stdout + p.stderr)


@dataclass(frozen=True)
class PinPlan:
    """The mpiexec flags and environment of pinned and of unpinned launches."""

    description: str
    pinned_args: tuple[str, ...] = ()
    unpinned_args: tuple[str, ...] = ()
    pinned_env: dict[str, str] = field(default_factory=dict)
    unpinned_env: dict[str, str] = field(default_factory=dict)

    def args(self, pinned: bool) -> list[str]:
        return list(self.pinned_args if pinned else self.unpinned_args)

    def env(self, pinned: bool) -> dict[str, str]:
        return dict(self.pinned_env if pinned else self.unpinned_env)


def pin_plan(pin: str, launcher: Launcher) -> PinPlan:
    """How launches are pinned: ``pin`` is ``auto`` (from the launcher; ValueError if it is not
    known) or the pinned launches' mpiexec flags (unpinned launches are unpinned either way:
    Intel MPI's set ``I_MPI_PIN=0``, Open MPI's get ``--bind-to none``).

    >>> pin_plan("auto", Launcher("mpich", "")).pinned_args
    ('-bind-to', 'core')
    >>> pin_plan("-bind-to hwthread", Launcher("intel", "")).unpinned_env
    {'I_MPI_PIN': '0'}
    """
    intel_off = {"I_MPI_PIN": "0"} if launcher.kind == "intel" else {}
    ompi_off = ("--bind-to", "none") if launcher.kind == "openmpi" else ()
    if pin != "auto":
        flags = tuple(shlex.split(pin))
        if not flags:
            raise ValueError("--pin: give auto or the pinned launches' mpiexec flags")
        return PinPlan(" ".join(flags), pinned_args=flags, unpinned_args=ompi_off, unpinned_env=intel_off)
    if launcher.kind == "mpich":
        return PinPlan("-bind-to core", pinned_args=("-bind-to", "core"))
    if launcher.kind == "openmpi":
        return PinPlan("--bind-to core (unpinned: --bind-to none)", pinned_args=("--bind-to", "core"),
                       unpinned_args=ompi_off)
    if launcher.kind == "intel":
        return PinPlan("I_MPI_PIN=1 (unpinned: I_MPI_PIN=0)", pinned_env={"I_MPI_PIN": "1"},
                       unpinned_env=intel_off)
    said = launcher.version or "no --version output"
    raise ValueError(f"--pin auto: cannot tell which MPI runs this mpiexec ({said}); give the pinning "
                     "flags, e.g. --pin='-bind-to core'")


def default_mpiexec() -> str | None:
    """The mpiexec next to this Python, else the one on PATH (None if neither)."""
    cand = Path(sys.executable).parent / "mpiexec"
    if cand.exists():
        return str(cand)
    return shutil.which("mpiexec") or shutil.which("mpirun")


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment for mpiexec: without a process manager's variables, this
    lpmpi first on PYTHONPATH, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_", "HYDRA_"))}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != SOURCE_ROOT]
    env["PYTHONPATH"] = os.pathsep.join([SOURCE_ROOT, *paths])
    env.update(extra)
    return env


# ----------------------------------------------------------------------------- one launch


@dataclass
class Launch:
    """One fresh launch: how it went, and the bench's header and rows (its JSON)."""

    index: int
    pinned: bool
    status: str = "ok"                 # ok, failed (exit status, no JSON) or timeout
    returncode: int | None = None
    seconds: float = 0.0
    error: str | None = None
    header: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    output_tail: str | None = None  # the last lines of its output, if it failed

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def start_busy() -> subprocess.Popen:
    """One extra process that keeps a core busy (a Python busy loop) until killed."""
    return subprocess.Popen([sys.executable, "-c", BUSY_LOOP], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_launch(index: int, pinned: bool, cmd: list[str], json_path: str, env: dict[str, str],
               timeout: float, busy: bool) -> Launch:
    """Run one launch (``cmd`` writes ``json_path``) in its own process group, killed whole on
    timeout; with ``busy``, one busy process runs alongside."""
    launch = Launch(index, pinned)
    spinner = start_busy() if busy else None
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True,
                            errors="replace")
    try:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            launch.status, launch.error = "timeout", f"timed out after {timeout:g} s (process group killed)"
    finally:
        _kill_group(proc)   # a rank left behind by mpiexec, or Ctrl-C
        if spinner is not None:
            _kill_group(spinner)
            spinner.wait()
    launch.seconds = time.monotonic() - t0
    launch.returncode = proc.returncode
    if launch.ok:
        try:
            with open(json_path, encoding="utf-8") as f:
                doc = json.load(f)
            launch.header, launch.rows = doc.get("header", {}), doc.get("rows", [])
        except (OSError, ValueError) as exc:
            launch.status, launch.error = "failed", f"no JSON from the bench ({type(exc).__name__}: {exc})"
        if proc.returncode != 0:
            launch.status, launch.error = "failed", f"exit status {proc.returncode}"
    if not launch.ok:
        launch.output_tail = "\n".join(out.splitlines()[-TAIL_LINES:])
    return launch


# ----------------------------------------------------------------------------- aggregation


def row_key(row: dict[str, Any]) -> Key:
    return (row["collective"], int(row["nprocs"]), int(row["nbytes"]), row["label"])


def times_by_key(launch: Launch) -> dict[Key, float]:
    """A launch's time (us) per (collective, nprocs, nbytes, label), for rows that have one."""
    return {row_key(r): float(r["time_us"]) for r in launch.rows if r.get("time_us")}


def _stats(values: Sequence[float | None]) -> dict[str, float | None]:
    have = [v for v in values if v is not None]
    if not have:
        return {"min": None, "median": None, "max": None}
    return {"min": min(have), "median": statistics.median(have), "max": max(have)}


def summarize(launches: Sequence[Launch]) -> list[dict[str, Any]]:
    """Per (collective, nprocs, size, algorithm), over the launches that succeeded: each launch's
    time (None where it has none), min / median / max and spread max/min; and, where the same
    launch measured native, its speed-up native / algorithm with min / median / max."""
    good = [la for la in launches if la.ok]
    per_launch = [times_by_key(la) for la in good]
    keys: dict[Key, None] = {}
    for la in good:
        keys.update({row_key(r): None for r in la.rows if r.get("time_us")})
    choices: dict[Key, list[str]] = {}
    for la in good:
        for r in la.rows:
            if r.get("selected_algorithm"):
                label = chunk_label(r["selected_algorithm"], r.get("selected_chunk_bytes"))
                choices.setdefault(row_key(r), []).append(label)
    out: list[dict[str, Any]] = []
    for key in sorted(keys, key=lambda k: (k[0], k[1], k[2])):   # stable: labels keep their order
        collective, nprocs, nbytes, label = key
        times = [t.get(key) for t in per_launch]
        entry: dict[str, Any] = {
            "collective": collective, "nprocs": nprocs, "nbytes": nbytes, "label": label,
            "launches": [la.index for la in good], "pinned": [la.pinned for la in good],
            "times_us": times, **{f"{k}_us": v for k, v in _stats(times).items()},
        }
        entry["spread"] = entry["max_us"] / entry["min_us"] if entry["min_us"] else None
        if key in choices:
            entry["auto_choices"] = list(dict.fromkeys(choices[key]))
        native = (collective, nprocs, nbytes, NATIVE)
        if label != NATIVE and any(native in t for t in per_launch):
            ups = [t[native] / t[key] if native in t and key in t else None for t in per_launch]
            entry["speedup_vs_native"] = ups
            entry.update({f"speedup_{k}": v for k, v in _stats(ups).items()})
        out.append(entry)
    return out


# ----------------------------------------------------------------------------- printing


def fmt_us(x: float | None) -> str:
    """A time in microseconds, 3-4 significant digits, ``-`` for none.

    >>> fmt_us(3.214), fmt_us(145.04), fmt_us(36110.2), fmt_us(None)
    ('3.21', '145.0', '36110', '-')
    """
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 1000 else f"{x:.1f}" if x >= 100 else f"{x:.2f}"


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def launch_line(launch: Launch, total: int) -> str:
    """The progress line of one launch: how it went and, per size, auto's time (else the fastest
    algorithm's) and its speed-up over native."""
    what = "pinned  " if launch.pinned else "unpinned"
    head = f"launch {launch.index + 1}/{total} L{launch.index:<2} {what}  {launch.seconds:6.1f} s"
    if not launch.ok:
        return f"{head}  {launch.status.upper()}: {launch.error}"
    cpus, count = launch.header.get("cpu_affinity"), launch.header.get("cpu_count")
    head += f"  ok, rank 0 may run on {cpus}/{count} cpus" if cpus else "  ok"
    times = times_by_key(launch)
    collectives = list(dict.fromkeys(k[0] for k in times))
    parts = []
    for collective, nprocs, nbytes in dict.fromkeys(k[:3] for k in times):
        here = {k[3]: t for k, t in times.items() if k[:3] == (collective, nprocs, nbytes)}
        label = AUTO if AUTO in here else min((lb for lb in here if lb != NATIVE), key=here.__getitem__,
                                               default=NATIVE)
        part = f"{format_bytes(nbytes)} {label} {fmt_us(here[label])} us"
        if NATIVE in here and label != NATIVE:
            part += f" {fmt_x(here[NATIVE] / here[label])}"
        parts.append((f"{collective} " if len(collectives) > 1 else "") + part)
    return head + ("  |  " + ", ".join(parts) if parts else "  (no timed rows)")


def _table(header: list[str], rows: list[list[str]], left: Sequence[int] = (1, -1)) -> list[str]:
    """Aligned columns: those at the indices ``left`` left-aligned, the others right-aligned."""
    n = len(header)
    lefts = {i % n for i in left}
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(n)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in lefts else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(header), *(line(r) for r in rows)]


def format_summary(summary: Sequence[dict[str, Any]], launches: Sequence[Launch]) -> list[str]:
    """The summary tables, per collective and P: times per launch, then speed-ups over native."""
    good = [la for la in launches if la.ok]
    names = [f"L{la.index}{'*' if la.pinned else ''}" for la in good]
    dtype = next((la.header.get("dtype") for la in good if la.header.get("dtype")), "")
    op = next((la.header.get("op") for la in good if la.header.get("op")), "")
    lines: list[str] = []
    for collective, nprocs in dict.fromkeys((e["collective"], e["nprocs"]) for e in summary):
        group = [e for e in summary if (e["collective"], e["nprocs"]) == (collective, nprocs)]
        lines += ["", (f"# {collective}  {dtype} {op}  P={nprocs}: time per launch in us (the bench's "
                       "median over repetitions of the slowest rank; * pinned)")]
        rows = [[format_bytes(e["nbytes"]), e["label"], *map(fmt_us, e["times_us"]), fmt_us(e["min_us"]),
                 fmt_us(e["median_us"]), fmt_us(e["max_us"]), fmt_x(e["spread"]),
                 ("-> " + ", ".join(e["auto_choices"])) if e.get("auto_choices") else ""] for e in group]
        lines += _table(["size", "algorithm", *names, "min", "median", "max", "max/min", "note"], rows)
        ups = [e for e in group if "speedup_vs_native" in e]
        if ups:
            lines += ["", (f"# {collective}  P={nprocs}: speed-up over native per launch (native "
                           "time / algorithm time in the same launch; > 1: faster than native)")]
            rows = [[format_bytes(e["nbytes"]), e["label"], *map(fmt_x, e["speedup_vs_native"]),
                     fmt_x(e["speedup_min"]), fmt_x(e["speedup_median"]), fmt_x(e["speedup_max"])]
                    for e in ups]
            lines += _table(["size", "algorithm", *names, "min", "median", "max"], rows, left=(1,))
    return lines


# ----------------------------------------------------------------------------- the command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [options] [-- lpmpi-bench options]",
        description="Run lpmpi-bench in N fresh mpiexec launches, alternately unpinned and pinned "
        "(launch 0 unpinned), and show each figure's spread over the launches and its speed-up "
        "over native per launch. Run it directly, not under mpiexec; everything after -- goes to "
        "lpmpi-bench (except --json).",
        epilog=f"example: {PROG} --launches 8 -- --sizes 1M,64M --algorithms auto,native --no-bandwidth",
    )
    p.add_argument("--launches", type=int, default=DEFAULT_LAUNCHES,
                   help=f"number of fresh launches (default {DEFAULT_LAUNCHES})")
    p.add_argument("-n", "--np", type=int, default=2, help="processes per launch (default 2)")
    p.add_argument("--mpiexec", metavar="PATH",
                   help="the mpiexec to run (default: the one next to this Python, else on PATH)")
    p.add_argument("--pin", default="auto", metavar="auto|FLAGS",
                   help="how pinned launches pin: auto (from `mpiexec --version`: MPICH -bind-to core, "
                   "Open MPI --bind-to core, Intel MPI by default with I_MPI_PIN=0 for unpinned "
                   "launches) or the mpiexec flags, e.g. --pin='-bind-to hwthread' (default auto)")
    p.add_argument("--busy", action="store_true",
                   help="keep one more process busy (a Python busy loop) during each launch")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds per launch; then its process group is killed and the launch "
                   f"counts as failed (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--json", metavar="PATH", help="write every launch's rows and the summary to PATH")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="extra environment of the launched ranks (repeatable)")
    return p


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """This command's arguments and the bench's (those after the first ``--``).

    >>> split_argv(["--launches", "2", "--", "--sizes", "1K"])
    (['--launches', '2'], ['--sizes', '1K'])
    """
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def _check_bench_args(p: argparse.ArgumentParser, bench_args: list[str], np: int) -> None:
    """Parse the bench's arguments with the bench's own parser (it exits 2 on bad ones); at
    ``np`` = 1 they must allow one process."""
    from lpmpi.bench.cli import build_parser as bench_parser

    ns = bench_parser().parse_args(bench_args)
    if ns.json:
        p.error("the bench's --json is this command's own (each launch writes one); use --json before --")
    if np == 1 and not ns.allow_single:
        p.error("-n 1: lpmpi-bench refuses to run as one process; add -- --allow-single to time P = 1")
    for mode in ("overlap", "node_bytes"):
        if getattr(ns, mode):
            p.error(f"--{mode.replace('_', '-')} gives no timed rows to compare across launches")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the launches and print the summary; return 0, or 1 if any launch failed."""
    ours, bench_args = split_argv(sys.argv[1:] if argv is None else argv)
    p = build_parser()
    args = p.parse_args(ours)
    if args.launches < 1:
        p.error("--launches must be >= 1")
    if args.np < 1:
        p.error("-n/--np must be >= 1")
    if not args.timeout > 0:
        p.error("--timeout must be > 0")
    extra: dict[str, str] = {}
    for item in args.env:
        k, sep, v = item.partition("=")
        if not sep or not k:
            p.error(f"--env {item!r}: give K=V")
        extra[k] = v
    mpiexec = args.mpiexec or default_mpiexec()
    if not mpiexec or not (os.path.exists(mpiexec) or shutil.which(mpiexec)):
        p.error(f"mpiexec not found ({mpiexec or 'none next to ' + sys.executable + ' nor on PATH'}); "
                "give --mpiexec PATH")
    _check_bench_args(p, bench_args, args.np)
    launcher = query_launcher(mpiexec)
    try:
        plan = pin_plan(args.pin, launcher)
    except ValueError as exc:
        p.error(str(exc))

    cpu = cpu_model()
    bench_cmd = [sys.executable, "-m", "lpmpi.bench", *bench_args]
    print("# lpmpi launch spread (python -m lpmpi.bench.launches)")
    print(f"# CPU             : {cpu} ({os.cpu_count()} processors here)")
    print(f"# mpiexec         : {mpiexec} ({launcher.version or launcher.kind})")
    print(f"# launches        : {args.launches} fresh, P = {args.np}, alternately unpinned and pinned "
          f"(pinned: {plan.description})")
    print(f"# busy process    : {'one Python busy loop during each launch' if args.busy else 'none'}")
    print(f"# bench           : {shlex.join(bench_cmd)}")
    if extra:
        print(f"# environment     : {' '.join(f'{k}={v}' for k, v in extra.items())}")
    sys.stdout.flush()

    launches: list[Launch] = []
    mpi_library = None
    with tempfile.TemporaryDirectory(prefix="lpmpi-launches-") as tmp:
        for i in range(args.launches):
            pinned = i % 2 == 1
            json_path = os.path.join(tmp, f"launch{i}.json")
            cmd = [mpiexec, *plan.args(pinned), "-n", str(args.np), *bench_cmd, "--json", json_path]
            env = child_env({**extra, **plan.env(pinned)})
            launch = run_launch(i, pinned, cmd, json_path, env, args.timeout, args.busy)
            launches.append(launch)
            if mpi_library is None and launch.header.get("mpi_library"):
                mpi_library = launch.header["mpi_library"]
                print(f"# MPI library     : {mpi_library}")
            print(launch_line(launch, args.launches))
            if launch.output_tail:
                print(f"    $ {shlex.join(cmd)}")
                print("\n".join("    | " + ln for ln in launch.output_tail.splitlines()))
            sys.stdout.flush()

    summary = summarize(launches)
    failed = [la for la in launches if not la.ok]
    good = len(launches) - len(failed)
    print()
    print(f"# summary over {good} of {len(launches)} launches (* pinned: {plan.description})")
    print(f"# CPU: {cpu}   MPI library: {mpi_library or 'unknown (no launch succeeded)'}")
    for line in format_summary(summary, launches):
        print(line)
    if not summary:
        print("# no timed rows" + ("" if good else ": no launch succeeded"))
    if failed:
        print(f"\n# FAILED: {len(failed)} launch(es): "
              + ", ".join(f"L{la.index} {la.status} ({la.error})" for la in failed))
    if args.json:
        doc = {
            "tool": "lpmpi.bench.launches",
            "cpu_model": cpu,
            "mpi_library": mpi_library,
            "mpiexec": mpiexec,
            "launcher": asdict(launcher),
            "nprocs": args.np,
            "pin": asdict(plan),
            "busy": args.busy,
            "env": extra,
            "timeout_s": args.timeout,
            "bench_args": bench_args,
            "launches": [asdict(la) for la in launches],
            "summary": summary,
            "status": "failed" if failed else "ok",
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"# wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
