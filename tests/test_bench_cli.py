"""The command lines around the measurement harness: ``--help`` of ``python -m lpmpi.bench`` and
``lpmpi-tune`` (help for every option, each default said once), the tuner's per-trial progress
lines when its output is not a terminal, Ctrl-C of a tuning run under mpiexec (every rank ends,
the rerun resumes), and tools/plots.py and sim/run.py without their optional tools."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _mpi import NO_TORCH, child_env, mpiexec, run

ROOT = Path(__file__).resolve().parent.parent
DOUBLED = re.compile(r"\(default[^)]*\)[\s.;,]*\(default", re.IGNORECASE)
FAST = ["--min-time", "0.002", "--min-reps", "3", "--max-reps", "6", "--warmup", "1",
        "--verify-rounds", "1"]


def _check_parser(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"{action.option_strings} has no help text"


def _check_help_text(text: str) -> None:
    blocks = re.split(r"\n  (?=-)", text)            # one block per option
    for block in blocks:
        flat = " ".join(block.split())
        assert not DOUBLED.search(flat), f"a default said twice: {flat}"
        assert flat.count("(default") <= 1, flat


def test_bench_help_has_every_option_once():
    from lpmpi.bench import build_parser

    _check_parser(build_parser())
    rc, out, _ = run([sys.executable, "-m", "lpmpi.bench", "--help"], child_env(), 60)
    assert rc == 0, out[-3000:]
    _check_help_text(out)
    for option in ("--sizes", "--compare-grid", "--scaling", "--memory", "--collective", "--check"):
        assert option in out


def test_tune_help_has_every_option_once():
    from lpmpi.tune.cli import build_parser

    _check_parser(build_parser())
    rc, out, _ = run([sys.executable, "-m", "lpmpi.tune", "--help"], child_env(), 60)
    assert rc == 0, out[-3000:]
    _check_help_text(out)
    assert "--max-trials-this-run" in out and "--crash-after" not in out
    assert "(default: 0)" in out                                          # --seed, --root


def test_doubled_default_is_detected():
    with pytest.raises(AssertionError):
        _check_help_text("usage: x\n\noptions:\n  --a A   the a (default: 4) (default: 4)\n")


# ----------------------------------------------------------------------------- docs and sim


def _path_without(*tools: str) -> str:
    """PATH without the directories holding any of ``tools``."""
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if not any(os.path.exists(os.path.join(d, t)) for t in tools)]
    return os.pathsep.join(keep)


def test_plots_help_and_missing_matplotlib():
    script = str(ROOT / "tools" / "plots.py")
    rc, out, _ = run([sys.executable, script, "--help"], child_env(), 60)
    assert rc == 0 and "time-vs-p" in out, out
    code = ("import runpy, sys; sys.modules['matplotlib'] = None; "
            f"sys.argv = [{script!r}, 'busbw']; runpy.run_path({script!r}, run_name='__main__')")
    rc, out, _ = run([sys.executable, "-c", code], child_env(), 60)
    assert rc in (1, 2) and "Traceback" not in out, out
    assert "matplotlib" in out and "install" in out and len(out.strip().splitlines()) == 1, out


@pytest.mark.parametrize("what", ["build", "fattree", "verify", "here"])
def test_sim_without_simgrid_says_what_to_install(what):
    script = str(ROOT / "sim" / "run.py")
    rc, out, _ = run([sys.executable, script, "--help"], child_env(), 60)
    assert rc == 0 and "fattree" in out, out
    env = child_env({"PATH": _path_without("smpirun", "smpicc")})
    rc, out, _ = run([sys.executable, script, what], env, 60)
    assert rc in (1, 2) and "Traceback" not in out, out
    assert "SimGrid" in out and "install" in out and len(out.strip().splitlines()) == 1, out


# ----------------------------------------------------------------------------- the tuner's progress


@pytest.mark.mpi
def test_tune_progress_lines_without_a_terminal(tmp_path):
    """Under mpiexec stderr is a pipe: still one line per trial, with the ETA."""
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.tune", "--collectives", "bcast", "--sizes", "8,16K",
           "--storage", "memory", "--out", str(tmp_path / "t.json"), "--no-fit-model", *FAST]
    rc, out, _ = run(cmd, child_env(), 120)
    assert rc == 0, out[-6000:]
    lines = [ln for ln in out.splitlines() if re.match(r"bcast (8 B|16 KiB) trial \d+/\d+ ", ln)]
    assert len(lines) >= 4, out[-4000:]
    assert all(re.search(r"  ETA (-|\d+s|\d+m\d\ds|\d+h\d\dm)$", ln) for ln in lines), lines
    assert any(re.search(r"trial \d+/\d+ lp chunk \d+ (B|KiB) [\d.]+ (us|ms)", ln) for ln in lines), lines
    assert "\r" not in out


# ----------------------------------------------------------------------------- Ctrl-C


def _rank0_pid(marker: str) -> int | None:
    """The pid of rank 0 of the tuning run whose command line holds ``marker`` (from /proc)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in cmd]
        ours = "lpmpi.tune" in words and any(marker in w for w in words) and "mpiexec" not in Path(words[0]).name
        if ours and b"PMI_RANK=0" in env:
            return int(d.name)
    return None


@pytest.mark.mpi
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_ctrl_c_ends_every_rank_and_the_rerun_resumes(tmp_path):
    from test_tuner import done, finished, measured

    db = tmp_path / "tune.db"
    args = ["--collectives", "allreduce", "--sizes", "8,1K,4K,16K,64K,256K", "--storage", f"sqlite:///{db}",
            "--out", str(tmp_path / "t.json"), "--no-fit-model", "--min-time", "0.02", "--min-reps", "5",
            "--max-reps", "20", "--warmup", "1", "--verify-rounds", "1"]
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.tune", *args]
    proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True, cwd=str(tmp_path))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while not any(re.search(r"trial [1-9]\d*/", ln) for ln in list(lines)):   # a trial finished
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-4000:]
            time.sleep(0.05)
        pid = _rank0_pid(str(db))
        assert pid is not None, "rank 0 not found"
        t0 = time.monotonic()
        os.kill(pid, signal.SIGINT)
        rc = proc.wait(timeout=60)                       # every rank ends, promptly
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(5)
    out = "".join(lines)
    assert rc != 0 and took < 60, out[-4000:]
    assert "interrupted; rerun the same command to resume" in out, out[-4000:]
    first = finished(db)
    assert measured(first), "no finished trial was stored"
    assert [v[0].name for v in first.values()].count("RUNNING") == 0, first   # the trial cut short: FAIL
    rc, out2, _ = run([mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.tune", *args, "--quiet",
                       "--max-trials-this-run", "1"], child_env(), 120)
    assert rc == 3, out2[-4000:]
    second = finished(db)
    assert all(second[k] == v for k, v in done(first).items())         # finished trials kept
    assert sum(map(len, measured(second).values())) == sum(map(len, measured(first).values())) + 1


# ------------------------------------------------------------------- --forms and --overlap


@pytest.mark.mpi
def test_forms_run_checks_every_form_and_summarizes(tmp_path):
    """A real --forms run at P = 2, every collective, with --fresh-input: one checked row per
    (case, form) and size, and the summary's ratios to the blocking call."""
    js = tmp_path / "forms.json"
    forms = ["blocking", "nonblocking", "persistent", "inplace"]
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.bench", "--forms", ",".join(forms),
           "--collective", "all", "--algorithms", "auto,ring", "--sizes", "8,64K", "--fresh-input",
           "--min-time", "0.002", "--warmup", "1", "--no-bandwidth", "--json", str(js)]
    rc, out, _ = run(cmd, child_env(), 180)
    assert rc == 0, out[-6000:]
    data = json.loads(js.read_text())
    labels = {(r["collective"], r["nbytes"], r["label"]) for r in data["rows"]}
    for coll in ("allreduce", "reduce", "bcast"):
        cases = ("auto", "ring") if coll == "allreduce" else ("auto",)  # ring: allreduce only
        suffixes = ("", "/nb", "/pers") + (("/inpl",) if coll != "bcast" else ())
        for n in (8, 64 << 10):
            for case in cases:
                for suffix in suffixes:
                    assert (coll, n, case + suffix) in labels, (coll, n, case + suffix)
        summary = data["summary"][coll]
        for form in ("nonblocking", "persistent") + (("inplace",) if coll != "bcast" else ()):
            assert set(summary[form]["auto"]) == {"8", str(64 << 10)}
            assert all(v > 0 for v in summary[form]["auto"].values())
    assert all(r["check"] == "ok" and r["time_us"] > 0 for r in data["rows"]), \
        [r for r in data["rows"] if r["check"] != "ok"]


@pytest.mark.mpi
def test_overlap_run_reports_both_computes_with_and_without_the_thread(tmp_path):
    js = tmp_path / "overlap.json"
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.bench", "--overlap", "--sizes", "64K",
           "--min-time", "0.002", "--warmup", "1", "--no-bandwidth", "--json", str(js)]
    rc, out, _ = run(cmd, child_env(), 180)
    assert rc == 0, out[-6000:]
    assert "overlap = (t_comm + t_compute - t_both) / min(t_comm, t_compute)" in out
    rows = json.loads(js.read_text())["overlap"]
    assert {(r["compute"], r["thread"]) for r in rows} == {(c, t) for c in ("sleep", "numpy")
                                                           for t in (False, True)}
    for r in rows:
        assert r["error"] is None and r["comm_us"] > 0 and r["compute_us"] > 0 and r["both_us"] > 0
        expect = (r["comm_us"] + r["compute_us"] - r["both_us"]) / min(r["comm_us"], r["compute_us"])
        assert r["overlap"] == pytest.approx(expect)


def test_fresh_input_needs_forms():
    rc, out, _ = run([sys.executable, "-m", "lpmpi.bench", "--fresh-input"], child_env(), 60)
    assert rc == 2 and "--fresh-input applies to --forms" in out, out[-2000:]


@pytest.mark.parametrize("args", [["--read-result"], ["--forms", "blocking", "--read-result", "--memory", "cuda"]])
def test_read_result_needs_forms_on_host_memory(args):
    rc, out, _ = run([sys.executable, "-m", "lpmpi.bench", *args], child_env(), 60)
    assert rc == 2 and "--read-result applies to --forms on host memory" in out, out[-2000:]


def test_read_result_reads_the_buffer_each_form_leaves_its_result_in():
    """The result's buffer by collective, form and rank (reduce: the root only), and the call
    then a read of it, inside the timed call."""
    import numpy as np

    from lpmpi import bench
    from lpmpi.bench.forms import _result_of, _then_read

    for coll in ("allreduce", "reduce", "bcast"):
        s = bench.Settings(coll, np.dtype("float32"), "sum", 0, 1, 3, 0.01, True, bench.HostMemory(),
                           read_result=True)
        bufs = bench.make_buffers(s.backend, coll, 1000, s.dtype, s.op, 0, 0)
        inpl = np.zeros(1000, np.float32)
        for form in ("blocking", "nonblocking", "persistent", "inplace"):
            got = _result_of(s, form, bufs, inpl, 0)
            want = bufs.send if coll == "bcast" else inpl if form == "inplace" else bufs.recv
            assert got is want, (coll, form)
        assert (_result_of(s, "blocking", bufs, inpl, 1) is None) == (coll == "reduce")
    calls = []
    read = _then_read(lambda: calls.append(1) or "r", np.ones(10, np.float64))
    assert read() == "r" and calls == [1]
    plain = lambda: None
    assert _then_read(plain, None) is plain


@pytest.mark.mpi
def test_forms_run_with_read_result_checks_every_row(tmp_path):
    js = tmp_path / "forms.json"
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.bench", "--forms", "blocking,inplace",
           "--collective", "all", "--algorithms", "auto", "--sizes", "8,64K", "--fresh-input", "--read-result",
           "--min-time", "0.002", "--warmup", "1", "--no-bandwidth", "--json", str(js)]
    rc, out, _ = run(cmd, child_env(), 180)
    assert rc == 0, out[-6000:]
    rows = json.loads(js.read_text())["rows"]
    # 2 sizes: every collective blocking, and in place where its row has that form (not bcast,
    # scatter, nor the v collectives)
    from lpmpi import engine
    from lpmpi.bench.forms import has_inplace
    with_inpl = {c for c in engine.COLLECTIVES if has_inplace(c)}
    assert with_inpl == {"allreduce", "reduce", "allgather", "reduce_scatter", "alltoall", "gather", "scan"}
    assert len(rows) == 2 * (len(engine.COLLECTIVES) + len(with_inpl)), rows
    assert all(r["check"] == "ok" and r["time_us"] > 0 for r in rows), rows
    inpl = {r["collective"] for r in rows if r["label"].endswith("/inpl")}
    assert inpl == with_inpl, inpl


@pytest.mark.mpi
@pytest.mark.parametrize("collective", ("allreduce", "allgather", "reduce_scatter"))
def test_peers_adds_checked_gloo_rows_and_the_speedup(tmp_path, collective):
    """--peers at P = 2: a gloo row per size, checked against native like every row, and the
    summary's auto-over-gloo speed-ups."""
    pytest.importorskip("torch", reason=NO_TORCH)
    js = tmp_path / "peers.json"
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.bench", "--peers", "--sizes",
           "8,64K", "--algorithms", "native,auto", "--min-time", "0.002", "--warmup", "1",
           "--no-bandwidth", "--json", str(js), "--collective", collective]
    rc, out, _ = run(cmd, child_env({"MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"}),
                     180)
    assert rc == 0, out[-6000:]
    data = json.loads(js.read_text())
    gloo = [r for r in data["rows"] if r["label"] == "gloo"]
    assert {r["nbytes"] for r in gloo} == {8, 64 << 10}
    assert all(r["check"] == "ok" and r["time_us"] > 0 for r in gloo), gloo
    assert set(data["summary"][collective]["auto_speedup_vs_gloo"]) == {"8", str(64 << 10)}
    assert "speed-up over torch.distributed gloo" in out


@pytest.mark.parametrize("args,msg", [
    (["--peers", "--collective", "bcast"], "--peers compares allreduce, allgather, reduce_scatter"),
    (["--peers", "--forms", "blocking"], "does not combine"),
    (["--peers", "--op", "avg"], "gloo has no avg"),
])
def test_peers_usage_errors(args, msg):
    rc, out, _ = run([sys.executable, "-m", "lpmpi.bench", *args], child_env(), 60)
    assert rc == 2 and msg in out, out[-2000:]


# ----------------------------------------------------------------------------- --transports


@pytest.mark.mpi
def test_transports_time_the_ring_over_each_transport_and_check_it(tmp_path):
    """--transports mpi,cma at P = 2, 1 MiB: the ring is one checked row per transport
    (``ring@mpi``, ``ring@cma``, each call over its own), native and auto as without it."""
    js = tmp_path / "transports.json"
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.bench", "--sizes", "1M", "--algorithms",
           "native,ring,auto", "--transports", "mpi,cma", "--min-time", "0.002", "--warmup", "1",
           "--no-bandwidth", "--json", str(js)]
    rc, out, _ = run(cmd, child_env(), 120)
    assert rc == 0, out[-6000:]
    if "# note: no rows over cma" in out:
        pytest.skip("this communicator has no single-copy (cma) transport")
    data = json.loads(js.read_text())
    rows = {r["label"]: r for r in data["rows"]}
    assert set(rows) == {"native", "ring@mpi", "ring@cma", "auto"}, list(rows)
    assert data["header"]["transports"] == ["mpi", "cma"]
    assert (rows["ring@mpi"]["transport"], rows["ring@cma"]["transport"]) == ("mpi", "cma")
    assert rows["ring@cma"]["algorithm"] == "ring" and rows["auto"]["transport"] is None
    assert all(r["check"] == "ok" and r["time_us"] > 0 for r in rows.values()), rows
    assert "# transports      : mpi,cma" in out


TRANSPORTS_WHERE = "--transports applies to the plain table, --forms and --compare-grid"


def test_compare_grid_has_a_ring_configuration_per_transport():
    """--compare-grid searches what the tuner searches: the ring once per transport."""
    from lpmpi.bench import grid_cases

    labels = [c.label for c in grid_cases("allreduce", 65536, 2, "host", ("mpi", "cma"))]
    rings = [lb for lb in labels if lb.startswith("ring/")]
    assert rings and all(lb.endswith(("@mpi", "@cma")) for lb in rings), labels
    assert len([lb for lb in rings if lb.endswith("@mpi")]) == len([lb for lb in rings if lb.endswith("@cma")])
    plain = [c.label for c in grid_cases("allreduce", 65536, 2, "host")]
    assert [lb for lb in plain if lb.startswith("ring/")] == [lb[:-4] for lb in rings if lb.endswith("@mpi")]
    assert all("@" not in lb for lb in (c.label for c in grid_cases("allreduce", 65536, 2, "cuda", ("mpi",))))


@pytest.mark.parametrize("args,msg", [
    (["--transports", "mpi,rdma"], "--transports: unknown rdma"),
    (["--transports", "mpi", "--memory", "cuda"], TRANSPORTS_WHERE),
    (["--transports", "mpi", "--scaling"], TRANSPORTS_WHERE),
])
def test_transports_usage_errors(args, msg):
    rc, out, _ = run([sys.executable, "-m", "lpmpi.bench", *args], child_env(), 60)
    assert rc == 2 and msg in out, out[-2000:]


def test_transports_cases_and_forms_calls_run_over_their_transport(monkeypatch):
    """build_cases: one ring case per transport (not for other algorithms, nor other collectives);
    each form's call of such a case made over its transport, the override off between calls."""
    import numpy as np
    from mpi4py import MPI

    import lpmpi
    from lpmpi import _core, bench
    from lpmpi.bench.forms import _inplace, _nonblocking, _persistent

    cases = bench.build_cases("allreduce", None, None, "sum", ["shm", "cma"])
    assert [c.label for c in cases if c.algorithm == "ring"] == ["ring@shm", "ring@cma"]
    assert all(c.transport is None for c in cases if c.algorithm != "ring")
    plain = bench.build_cases("bcast", None, None, "sum")
    assert bench.build_cases("bcast", None, None, "sum", ["shm"]) == plain

    def asked() -> tuple:
        return _core.transport_choice("allreduce", 1 << 20)

    seen = []
    for name in ("allreduce", "iallreduce", "allreduce_init"):
        real = getattr(lpmpi, name)
        monkeypatch.setattr(lpmpi, name, lambda *a, _real=real, **k: seen.append(asked()) or _real(*a, **k))
    s = bench.Settings("allreduce", np.dtype("float32"), "sum", 0, 1, 3, 0.01, True, bench.HostMemory())
    bufs = bench.make_buffers(s.backend, "allreduce", 1000, s.dtype, s.op, 0, 0)
    case = bench.Case("ring@cma", "ring", None, "cma")
    persistent, req = _persistent(case, s, bufs, MPI.COMM_SELF)
    for call in (bench.make_call(case, "allreduce", bufs, "sum", 0, MPI.COMM_SELF),
                 _nonblocking(case, s, bufs, MPI.COMM_SELF), _inplace(case, s, bufs.recv, MPI.COMM_SELF)):
        assert asked() == (None, "model")
        call()
    persistent()
    req.free()
    assert seen == [("cma", "override")] * 4 and asked() == (None, "model")
