"""``python -m lpmpi.bench.launches``: the launch-spread benchmark.  Its aggregation and tables on
synthetic launches, the launcher detection and pinning plans, its argument errors, whole runs
against a fake ``mpiexec`` (a script that writes the bench's JSON: alternation of pinned
launches, --env, --busy, a failing and a hanging launch), and one real 2-launch run at P = 2."""
from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from pathlib import Path

import pytest
from _mpi import child_env, mpiexec, run

from lpmpi.bench import launches as L

# ----------------------------------------------------------------------------- synthetic launches


def _row(nbytes: int, label: str, time_us: float | None, collective: str = "allreduce",
         selected: str | None = None) -> dict:
    return {"collective": collective, "label": label, "nbytes": nbytes, "nprocs": 2, "time_us": time_us,
            "selected_algorithm": selected, "selected_chunk_bytes": 65536 if selected else None}


def _launch(index: int, rows: list[dict], status: str = "ok") -> L.Launch:
    header = {"dtype": "float32", "op": "sum", "cpu_affinity": 1 if index % 2 else 2, "cpu_count": 2,
              "mpi_library": "MPICH Version: 9.9"}
    return L.Launch(index, index % 2 == 1, status=status, seconds=1.5, header=header, rows=rows,
                    error=None if status == "ok" else "exit status 1")


def _three_launches() -> list[L.Launch]:
    return [
        _launch(0, [_row(1024, "native", 10.0), _row(1024, "auto", 5.0, selected="mst"),
                    _row(1 << 20, "native", 300.0), _row(1 << 20, "auto", 150.0, selected="ring")]),
        _launch(1, [_row(1024, "native", 12.0), _row(1024, "auto", 4.0, selected="mst"),
                    _row(1 << 20, "native", 330.0), _row(1 << 20, "auto", 100.0, selected="lp")]),
        _launch(2, [_row(1024, "native", 9.0), _row(1024, "auto", 6.0, selected="mst"),
                    _row(1 << 20, "native", 360.0), _row(1 << 20, "auto", 120.0, selected="ring")]),
    ]


def _entry(summary: list[dict], nbytes: int, label: str) -> dict:
    [e] = [e for e in summary if e["nbytes"] == nbytes and e["label"] == label]
    return e


def test_summary_statistics_over_launches():
    summary = L.summarize(_three_launches())
    assert [(e["nbytes"], e["label"]) for e in summary] == [
        (1024, "native"), (1024, "auto"), (1 << 20, "native"), (1 << 20, "auto")]
    auto = _entry(summary, 1 << 20, "auto")
    assert auto["times_us"] == [150.0, 100.0, 120.0]
    assert (auto["min_us"], auto["median_us"], auto["max_us"]) == (100.0, 120.0, 150.0)
    assert auto["spread"] == pytest.approx(1.5)
    assert auto["pinned"] == [False, True, False] and auto["launches"] == [0, 1, 2]
    assert auto["speedup_vs_native"] == pytest.approx([2.0, 3.3, 3.0])   # per launch, same launch's native
    assert (auto["speedup_min"], auto["speedup_median"], auto["speedup_max"]) == pytest.approx((2.0, 3.0, 3.3))
    assert auto["auto_choices"] == ["ring/64K", "lp/64K"]
    native = _entry(summary, 1024, "native")
    assert "speedup_vs_native" not in native and native["median_us"] == 10.0


def test_failed_launches_and_missing_rows_are_left_out():
    launches = _three_launches()
    launches[1].status = "failed"                     # its rows do not count
    del launches[2].rows[2]                           # launch 2 has no native at 1 MiB
    summary = L.summarize(launches)
    auto = _entry(summary, 1 << 20, "auto")
    assert auto["launches"] == [0, 2] and auto["times_us"] == [150.0, 120.0]
    assert auto["speedup_vs_native"] == [2.0, None]
    assert auto["speedup_min"] == auto["speedup_max"] == 2.0
    assert _entry(summary, 1 << 20, "native")["times_us"] == [300.0, None]
    assert L.summarize([_launch(0, [], status="timeout")]) == []


def test_summary_tables_are_aligned_and_mark_pinned_launches():
    launches = _three_launches()
    lines = L.format_summary(L.summarize(launches), launches)
    text = "\n".join(lines)
    assert "float32 sum  P=2" in text and "speed-up over native" in text
    head = next(ln for ln in lines if ln.lstrip().startswith("size"))
    assert re.search(r"L0\s+L1\*\s+L2\s+min\s+median\s+max\s+max/min", head), head
    end = head.index("max/min") + len("max/min")
    rows = lines[lines.index(head) + 1:lines.index(head) + 5]
    assert all(len(ln) >= end and ln[end - 1] == "x" and ln[end - 2].isdigit() for ln in rows), rows
    assert any("1 MiB  auto" in ln and "3.00x" in ln for ln in lines), text
    assert any("-> ring/64K, lp/64K" in ln for ln in lines), text


def test_launch_line_says_pinning_and_auto_per_size():
    la = _three_launches()[1]
    line = L.launch_line(la, 8)
    assert line.startswith("launch 2/8 L1  pinned") and "1/2 cpus" in line, line
    assert "1 KiB auto 4.00 us 3.00x" in line and "1 MiB auto 100.0 us 3.30x" in line, line
    bad = _launch(3, [], status="timeout")
    bad.error = "timed out after 5 s (process group killed)"
    assert "TIMEOUT: timed out after 5 s" in L.launch_line(bad, 8)


def test_number_formats():
    assert [L.fmt_us(x) for x in (2.512, 145.04, 36110.2, None)] == ["2.51", "145.0", "36110", "-"]
    assert L.fmt_x(1.234) == "1.23x" and L.fmt_x(None) == "-"


# ----------------------------------------------------------------------------- launcher and pinning


@pytest.mark.parametrize("text,kind", [
    ("HYDRA build details:\n    Version:                                 5.0.2\n", "mpich"),
    ("mpiexec (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n", "openmpi"),
    ("mpirun (OpenRTE) 3.1.6\n", "openmpi"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.13 Build 20240701 (id: 8f9b8b6)\n", "intel"),
    ("something else 1.0\n", "unknown"),
    ("", "unknown"),
])
def test_detect_launcher(text, kind):
    assert L.detect_launcher(text).kind == kind


def test_pin_plans():
    mpich = L.pin_plan("auto", L.Launcher("mpich", ""))
    assert mpich.args(True) == ["-bind-to", "core"] and mpich.args(False) == [] and mpich.env(False) == {}
    ompi = L.pin_plan("auto", L.Launcher("openmpi", ""))
    assert ompi.args(True) == ["--bind-to", "core"] and ompi.args(False) == ["--bind-to", "none"]
    intel = L.pin_plan("auto", L.Launcher("intel", ""))
    assert intel.args(True) == intel.args(False) == []
    assert intel.env(True) == {"I_MPI_PIN": "1"} and intel.env(False) == {"I_MPI_PIN": "0"}
    given = L.pin_plan("-bind-to hwthread", L.Launcher("unknown", ""))
    assert given.args(True) == ["-bind-to", "hwthread"] and given.args(False) == [] and given.env(False) == {}
    assert L.pin_plan("--map-by core", L.Launcher("openmpi", "")).args(False) == ["--bind-to", "none"]
    assert L.pin_plan("-bind-to hwthread", L.Launcher("intel", "")).env(False) == {"I_MPI_PIN": "0"}
    with pytest.raises(ValueError, match="cannot tell"):
        L.pin_plan("auto", L.Launcher("unknown", "mystery 1.0"))
    with pytest.raises(ValueError):
        L.pin_plan("  ", L.Launcher("mpich", ""))


def test_module_doctests():
    import doctest

    assert doctest.testmod(L).failed == 0


def test_split_argv():
    assert L.split_argv(["-n", "2"]) == (["-n", "2"], [])
    assert L.split_argv(["--", "--sizes", "1K", "--", "x"]) == ([], ["--sizes", "1K", "--", "x"])


# ----------------------------------------------------------------------------- a fake mpiexec

FAKE = r'''#!{python}
"""A fake mpiexec: --version says FAKE_VERSION; a launch logs its arguments and environment to
FAKE_LOG and writes the bench's JSON (FAKE_MODE: ok, fail1 = the second launch exits 3,
hang = sleep)."""
import json, os, sys, time
if sys.argv[1:] == ["--version"]:
    print(os.environ.get("FAKE_VERSION", "HYDRA build details:\n    Version: 9.9"))
    sys.exit(0)
argv = sys.argv[1:]
log = os.environ["FAKE_LOG"]
n = sum(1 for _ in open(log)) if os.path.exists(log) else 0
busy = False
for d in os.listdir("/proc"):
    try:
        words = open(f"/proc/{{d}}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    busy = busy or [w.decode() for w in words[-3:-1]] == ["-c", "while True: pass"]
with open(log, "a") as f:
    f.write(json.dumps({{"argv": argv, "I_MPI_PIN": os.environ.get("I_MPI_PIN"),
                        "FOO": os.environ.get("FOO"), "busy": busy}}) + "\n")
mode = os.environ.get("FAKE_MODE", "ok")
if mode == "hang":
    time.sleep(300)
if mode == "fail1" and n == 1:
    print("rank 1: something broke")
    sys.exit(3)
path = argv[argv.index("--json") + 1]
t = 1.0 + n
rows = [dict(collective="allreduce", label=lb, nbytes=1024, nprocs=2, time_us=us, selected_algorithm=None)
        for lb, us in (("native", 2 * t), ("auto", t))]
json.dump({{"header": {{"mpi_library": "FAKE MPI 9.9", "dtype": "float32", "op": "sum",
                        "cpu_affinity": 2, "cpu_count": 2}}, "rows": rows}}, open(path, "w"))
print("fake bench ran")
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    exe = tmp_path / "mpiexec"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))

    def calls() -> list[dict]:
        return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    return str(exe), calls


def _busy_loops() -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        try:
            words = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if [w.decode(errors="replace") for w in words[-3:-1]] == ["-c", L.BUSY_LOOP]:
            pids.append(int(d.name))
    return pids


def test_fake_run_alternates_pinning_and_writes_json(fake, tmp_path, capsys):
    exe, calls = fake
    out_json = tmp_path / "spread.json"
    rc = L.main(["--mpiexec", exe, "--launches", "3", "-n", "3", "--env", "FOO=bar=baz", "--json", str(out_json),
                 "--", "--sizes", "1K", "--algorithms", "auto,native"])
    out = capsys.readouterr().out
    assert rc == 0, out
    argvs = [c["argv"] for c in calls()]
    assert len(argvs) == 3
    assert [a[:2] == ["-bind-to", "core"] for a in argvs] == [False, True, False]
    for a in argvs:
        i = a.index("-n")
        assert a[i + 1:i + 5] == ["3", sys.executable, "-m", "lpmpi.bench"]
        assert a[i + 5:i + 9] == ["--sizes", "1K", "--algorithms", "auto,native"] and a[-2] == "--json"
    assert all(c["FOO"] == "bar=baz" and not c["busy"] for c in calls())
    assert "MPICH hydra 9.9" in out and "# MPI library     : FAKE MPI 9.9" in out
    assert len(re.findall(r"^launch \d/3 L\d ", out, re.MULTILINE)) == 3
    doc = json.loads(out_json.read_text())
    assert doc["status"] == "ok" and [la["pinned"] for la in doc["launches"]] == [False, True, False]
    assert [la["rows"][1]["time_us"] for la in doc["launches"]] == [1.0, 2.0, 3.0]
    auto = _entry(doc["summary"], 1024, "auto")
    assert auto["median_us"] == 2.0 and auto["speedup_median"] == 2.0 and auto["spread"] == 3.0


def test_fake_intel_unpinned_launches_set_i_mpi_pin(fake, monkeypatch, capsys):
    exe, calls = fake
    monkeypatch.setenv("FAKE_VERSION", "Intel(R) MPI Library for Linux* OS, Version 2021.13 Build 1")
    assert L.main(["--mpiexec", exe, "--launches", "2", "--", "--sizes", "1K"]) == 0, capsys.readouterr().out
    assert [c["I_MPI_PIN"] for c in calls()] == ["0", "1"]
    assert all("-bind-to" not in c["argv"] for c in calls())


def test_fake_busy_process_runs_during_each_launch_only(fake, capsys):
    exe, calls = fake
    assert L.main(["--mpiexec", exe, "--launches", "2", "--busy", "--", "--sizes", "1K"]) == 0
    assert "one Python busy loop" in capsys.readouterr().out
    assert [c["busy"] for c in calls()] == [True, True]
    time.sleep(0.2)
    assert _busy_loops() == []


def test_fake_failed_launch_is_reported_and_the_rest_run(fake, monkeypatch, tmp_path, capsys):
    exe, calls = fake
    monkeypatch.setenv("FAKE_MODE", "fail1")
    out_json = tmp_path / "spread.json"
    rc = L.main(["--mpiexec", exe, "--launches", "3", "--json", str(out_json), "--", "--sizes", "1K"])
    out = capsys.readouterr().out
    assert rc == 1 and len(calls()) == 3, out
    assert "FAILED: exit status 3" in out and "    | rank 1: something broke" in out
    assert "# summary over 2 of 3 launches" in out and "# FAILED: 1 launch(es): L1 failed" in out
    doc = json.loads(out_json.read_text())
    assert doc["status"] == "failed" and [la["status"] for la in doc["launches"]] == ["ok", "failed", "ok"]
    assert _entry(doc["summary"], 1024, "auto")["launches"] == [0, 2]


def test_fake_hanging_launch_times_out(fake, monkeypatch, capsys):
    exe, calls = fake
    monkeypatch.setenv("FAKE_MODE", "hang")
    t0 = time.monotonic()
    rc = L.main(["--mpiexec", exe, "--launches", "2", "--timeout", "1", "--", "--sizes", "1K"])
    out = capsys.readouterr().out
    assert rc == 1 and time.monotonic() - t0 < 30, out
    assert out.count("TIMEOUT: timed out after 1 s (process group killed)") == 2, out
    assert len(calls()) == 2
    assert "no launch succeeded" in out


@pytest.mark.parametrize("argv,message", [
    (["--launches", "0"], "--launches must be >= 1"),
    (["-n", "0"], "--np must be >= 1"),
    (["--timeout", "0"], "--timeout must be > 0"),
    (["--env", "NOVALUE"], "give K=V"),
    (["--mpiexec", "/nonexistent/mpiexec"], "mpiexec not found"),
    (["--", "--json", "x.json"], "use --json before --"),
    (["--", "--overlap"], "no timed rows"),
    (["-n", "1"], "add -- --allow-single"),                  # the bench refuses one process
    (["--", "--sizes", "zero"], "--sizes"),
    (["--", "--no-such-option"], "unrecognized arguments"),
    (["--bogus"], "unrecognized arguments"),
])
def test_argument_errors(fake, argv, message, capsys):
    exe, calls = fake
    with pytest.raises(SystemExit) as exc:
        L.main(["--mpiexec", exe, *argv] if "--mpiexec" not in argv else argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert calls() == []                              # nothing was launched


def test_unknown_launcher_needs_explicit_pin(fake, monkeypatch, capsys):
    exe, calls = fake
    monkeypatch.setenv("FAKE_VERSION", "mystery launcher 1.0")
    with pytest.raises(SystemExit) as exc:
        L.main(["--mpiexec", exe, "--", "--sizes", "1K"])
    assert exc.value.code == 2 and "--pin" in capsys.readouterr().err and calls() == []
    assert L.main(["--mpiexec", exe, "--launches", "2", "--pin=-x -y", "--", "--sizes", "1K"]) == 0
    assert [c["argv"][:2] == ["-x", "-y"] for c in calls()] == [False, True]


# ----------------------------------------------------------------------------- a real run


@pytest.mark.mpi
def test_two_real_launches(tmp_path):
    """Two fresh launches at P = 2 (the second pinned), tiny sizes: both succeed and the summary
    has auto's and native's spread and auto's speed-up."""
    out_json = tmp_path / "spread.json"
    cmd = [sys.executable, "-m", "lpmpi.bench.launches", "--mpiexec", mpiexec(), "--launches", "2", "-n", "2",
           "--json", str(out_json), "--", "--sizes", "1K", "--algorithms", "auto,native", "--no-bandwidth",
           "--reps", "3", "--warmup", "1", "--min-time", "0.01"]
    rc, out, _ = run(cmd, child_env(), 120)
    assert rc == 0, out[-6000:]
    assert re.search(r"^launch 1/2 L0  unpinned .* ok", out, re.MULTILINE), out
    assert re.search(r"^launch 2/2 L1  pinned .* ok", out, re.MULTILINE), out
    assert "speed-up over native" in out and "MPI library" in out
    doc = json.loads(out_json.read_text())
    assert doc["status"] == "ok" and [la["pinned"] for la in doc["launches"]] == [False, True]
    unpinned, pinned = (la["header"]["cpu_affinity"] for la in doc["launches"])
    assert pinned <= unpinned and (pinned == 1 or os.cpu_count() == 1)
    auto = _entry(doc["summary"], 1024, "auto")
    assert all(t and t > 0 for t in auto["times_us"]) and len(auto["speedup_vs_native"]) == 2
    assert _entry(doc["summary"], 1024, "native")["median_us"] > 0


def test_help_has_every_option_once():
    from test_bench_cli import _check_help_text, _check_parser

    _check_parser(L.build_parser())
    rc, out, _ = run([sys.executable, "-m", "lpmpi.bench.launches", "--help"], child_env(), 60)
    assert rc == 0, out[-3000:]
    _check_help_text(out)
    assert all(o in out for o in ("--launches", "--pin", "--busy", "--timeout", "--env", "--json"))
