"""Same inputs, P, algorithm and chunk size give the same bits: across repeats and in-place
modes inside one run, across ranks, and across separate runs (DIGEST lines compared)."""
import re

import pytest
from _mpi import run_suite

pytestmark = pytest.mark.mpi


def digests(out):
    return dict(re.findall(r"^DIGEST (.*) (\S+)$", out, flags=re.MULTILINE))


@pytest.mark.parametrize("nprocs,stride", [(1, 2), (2, 1), (3, 3), (5, 6)],
                         ids=lambda v: str(v))
def test_determinism_within_run(nprocs, stride):
    run_suite("determinism", nprocs, "--stride", str(stride))


@pytest.mark.parametrize("nprocs", (2, 3), ids=lambda p: f"P{p}")
def test_determinism_across_runs(nprocs):
    args = ("--digests", "--stride", "4" if nprocs == 2 else "8")
    a = digests(run_suite("determinism", nprocs, *args))
    b = digests(run_suite("determinism", nprocs, *args))
    assert a, "no DIGEST lines"
    assert a.keys() == b.keys()
    diff = [k for k in a if a[k] != b[k]]
    assert not diff, "results differ between two runs:\n" + "\n".join(
        f"{k}: {a[k]} vs {b[k]}" for k in diff[:20])
