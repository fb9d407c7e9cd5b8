"""The memory-traffic lower bound (lpmpi.bench.bound) against hand-computed values, and the
bench's of_bound column and summary line at P = 2."""
import json
import sys

import pytest
from _mpi import child_env, mpiexec, run

from lpmpi.bench.bound import BOUND_MIN_BYTES, bound_seconds, traffic_bytes

MiB = 1 << 20


@pytest.mark.parametrize("coll,n,P,expect", [
    # allreduce: reads n (2P-1)/P (own + peers' parts of the owned block, then the other
    # result blocks), writes n (the owned block, then the P-1 copied ones)
    ("allreduce", 100, 1, 200),                 # a copy: read n, write n
    ("allreduce", 64 * MiB, 2, 160 * MiB),      # 1.5n read + 1n written = 2.5n
    ("allreduce", 300, 3, 800),                 # read 500 (300 + 200), write 300
    ("allreduce", 1000, 4, 2750),               # read 1750, write 1000
    ("allreduce", 800, 8, 2300),                # read 1500, write 800
    ("reduce", 300, 3, 800),                    # the root: as allreduce
    ("reduce", 64 * MiB, 2, 160 * MiB),
    ("bcast", 1000, 1, 0),                      # nothing moves
    ("bcast", 1000, 4, 2000),                   # each non-root reads n and writes n
])
def test_traffic_matches_hand_computed_values(coll, n, P, expect):
    assert traffic_bytes(coll, n, P) == pytest.approx(expect)


def test_bound_seconds_and_errors():
    # the example: 64 MiB at P = 2 and 32 GB/s read + write per rank: about 5 ms
    assert bound_seconds("allreduce", 64 * MiB, 2, 32.0) == pytest.approx(2.5 * 64 * MiB / 32e9)
    assert 5.0e-3 < bound_seconds("allreduce", 64 * MiB, 2, 32.0) < 5.5e-3
    with pytest.raises(ValueError, match="collective"):
        traffic_bytes("exscan", 10, 2)
    with pytest.raises(ValueError, match="nprocs"):
        traffic_bytes("allreduce", 10, 0)
    with pytest.raises(ValueError, match="copy_GBps_per_rank"):
        bound_seconds("allreduce", 10, 2, 0.0)


@pytest.mark.mpi
def test_bench_prints_each_rows_fraction_of_the_bound(tmp_path):
    js = tmp_path / "b.json"
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.bench", "--sizes", "64K,1MiB",
           "--algorithms", "lp,native,auto", "--min-time", "0.002", "--warmup", "1", "--json", str(js)]
    rc, out, _ = run(cmd, child_env(), 180)
    assert rc == 0, out[-6000:]
    doc = json.loads(js.read_text())
    for r in doc["rows"]:
        if r["label"] == "mpi4py" or r["time_us"] is None:
            continue
        if r["nbytes"] < BOUND_MIN_BYTES:          # a copy that small measures call overhead
            assert r["bound_us"] is None and r["of_bound"] is None, r
            continue
        want = bound_seconds("allreduce", r["nbytes"], 2, r["bound_copy_GBps"]) * 1e6
        assert r["bound_copy_GBps"] > 0 and r["bound_us"] == pytest.approx(want), r
        assert r["of_bound"] == pytest.approx(want / r["time_us"]), r
    assert "of_bound" in out and "memory-traffic estimate at 1 MiB" in out, out[-3000:]
    mb = doc["summary"]["allreduce"]["memory_bound"]
    assert mb["nbytes"] == MiB and mb["times_bound"]["auto"] > 0
    # no bandwidth measured: no bound, "-" in the column
    rc, out, _ = run(cmd[:-2] + ["--no-bandwidth"], child_env(), 180)
    assert rc == 0 and "memory-traffic estimate" not in out, out[-3000:]
