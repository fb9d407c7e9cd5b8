"""The measurement harness in one process (MPI.COMM_SELF): interleaving, repetitions, the
checkpoint, the fake device backend, the oracle, and the summary's plain verdict on auto."""
from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

from lpmpi import bench
from lpmpi.bench import harness


def test_measure_interleaves_and_counts_repetitions():
    order: list[str] = []
    calls = [lambda: order.append("a"), lambda: order.append("b"), lambda: order.append("c")]
    timings = harness.measure(MPI.COMM_SELF, calls, 4, warmup=0)
    assert [t.reps for t in timings] == [4, 4, 4] and not any(t.pruned for t in timings)
    # one warm-up repetition (at least one), then repetition r starts at call r % 3
    assert "".join(order) == "abc" + "abc" + "bca" + "cab" + "abc"
    assert all(t.min <= t.median <= t.max for t in timings)


def test_adaptive_repetitions_from_the_warm_up():
    reps = harness.Repetitions(min_time=0.01, min_reps=3, max_reps=40)
    assert reps.count([1e-3]) == 10 and reps.count([1.0]) == 3 and reps.count([1e-9]) == 40
    assert harness.Repetitions(fixed=2).count([1e-9]) == 2
    [t] = harness.measure(MPI.COMM_SELF, [lambda: None], harness.Repetitions(min_time=1e-9), warmup=2)
    assert t.reps == harness.MIN_REPS


def test_checkpoint_stops_the_measurement():
    seen: list[list[float]] = []

    def stop(medians: list[float]) -> bool:
        seen.append(medians)
        return True

    timings = harness.measure(MPI.COMM_SELF, [lambda: None, lambda: None], 10, warmup=1,
                              checkpoint=harness.Checkpoint(3, stop))
    assert [t.reps for t in timings] == [3, 3] and all(t.pruned for t in timings)
    assert len(seen) == 1 and len(seen[0]) == 2
    kept = harness.measure(MPI.COMM_SELF, [lambda: None], 5, checkpoint=harness.Checkpoint(3, lambda m: False))
    assert kept[0].reps == 5 and not kept[0].pruned
    late = harness.measure(MPI.COMM_SELF, [lambda: None], 3, checkpoint=harness.Checkpoint(3, stop))
    assert late[0].reps == 3 and len(seen) == 1                         # no checkpoint at the end


def test_prepared_call_runs_its_before_untimed():
    events: list[str] = []

    def before() -> None:
        events.append("before")
        time.sleep(0.1)

    call = harness.Prepared(lambda: events.append("call"), before)
    [t] = harness.measure(MPI.COMM_SELF, [call], 3, warmup=0)
    assert events == ["before", "call"] * 4                   # the warm-up and 3 timed repetitions
    assert t.max < 0.05, t.seconds          # the sleep is not in the time (margin for a busy machine)
    assert call() is None and events[-1] == "call" and events[-2] == "call"


def test_probe_reports_the_error():
    assert harness.probe(MPI.COMM_SELF, lambda: None) is None
    assert harness.probe(MPI.COMM_SELF, lambda: 1 / 0) == "ZeroDivisionError: division by zero"


def test_backends_and_the_one_fake_device():
    host = bench.memory_backend("host", MPI.COMM_SELF)
    assert isinstance(host, bench.HostMemory) and host.mpi_readable
    fake = bench.FakeDeviceMemory()
    arr = fake.from_host(np.arange(4, dtype=np.float32))
    fake.fill_bytes(arr, 0)
    assert fake.to_host(arr).tolist() == [0, 0, 0, 0] and not fake.mpi_readable
    fake.copy_from_host(arr, np.arange(4, dtype=np.float32))
    assert fake.to_host(arr).tolist() == [0, 1, 2, 3]
    buf = host.from_host(np.zeros((2, 2), dtype=np.float64))
    host.copy_from_host(buf, np.arange(4, dtype=np.float64))
    assert buf.tolist() == [[0, 1], [2, 3]]
    assert not hasattr(bench.HostMemory, "synchronize")
    with pytest.raises(ValueError):
        bench.memory_backend("disk", MPI.COMM_SELF)


def test_buffers_hold_the_pattern_and_the_sentinel():
    dt = np.dtype("int32")
    b = bench.make_buffers(bench.HostMemory(), "allreduce", 8, dt, "sum", 1, 0)
    assert np.array_equal(b.send, bench.pattern(np.arange(8, dtype=np.uint64), 1, dt, "sum"))
    assert np.all(b.recv.view(np.uint8) == bench.SENTINEL)
    assert bench.same_result(b.orig, b.send, dt, 2)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "band", "avg"])
def test_single_rank_rows_are_measured_and_checked(op):
    s = bench.Settings("allreduce", np.dtype("float64" if op != "band" else "int32"), op, 0, 1, 3, 0.01,
                       True, bench.HostMemory())
    rows = bench.run_size(MPI.COMM_SELF, s, 1000, bench.build_cases("allreduce", None, None, op))
    assert rows and all(r.check in ("ok", "n/a") and r.reps == 3 and r.time_us for r in rows), rows


def _auto_native(pairs):
    rows = []
    for n, (auto, native) in pairs.items():
        for label, us in (("auto", auto), ("native", native)):
            r = bench.Row("allreduce", label, label, None, n, n // 4, "float32", "sum", None, 2)
            r.time_us = us
            rows.append(r)
    return rows


def test_summary_says_plainly_whether_auto_is_slower():
    lines, data = bench.summarize(_auto_native({1024: (9.0, 10.0), 1 << 20: (97.0, 100.0)}))
    assert "auto is never slower than native: worst speed-up 1.03x at 1 MiB (over 2 sizes)" in lines
    assert data["worst_auto_over_native"] == {"ratio": pytest.approx(0.97), "nbytes": 1 << 20}
    lines, data = bench.summarize(_auto_native({65536: (10.0, 8.5), 1 << 20: (90.0, 100.0)}))
    assert "auto is slower than native at 1 of 2 sizes: worst speed-up 0.85x at 64 KiB" in lines
    assert data["worst_auto_over_native"]["nbytes"] == 65536
