"""Several nodes, emulated on one host (MPICH's MPIR_CVAR_NUM_CLIQUES=2: round robin, or blocks
with MPIR_CVAR_CLIQUES_BY_BLOCK=1; between cliques MPICH uses its network module): the contract
matrices at P = 3 and 4 in both placements, and the bytes each rank sends to the other node
(bench --node-bytes): lp's chains and the ring follow node order, so round robin costs what
blocks cost."""
import json
import sys

import pytest
from _mpi import child_env, mpiexec, run, run_suite

pytestmark = pytest.mark.mpi

PLACEMENTS = {"roundrobin": {"MPIR_CVAR_NUM_CLIQUES": "2"},
              "block": {"MPIR_CVAR_NUM_CLIQUES": "2", "MPIR_CVAR_CLIQUES_BY_BLOCK": "1"}}


def mpich():
    from mpi4py import MPI
    return MPI.Get_library_version().startswith("MPICH")


needs_mpich = pytest.mark.skipif("not mpich()", reason="node emulation is MPICH's (MPIR_CVAR_NUM_CLIQUES)")


@needs_mpich
@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("nprocs", (3, 4), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_contract_on_two_emulated_nodes(suite, nprocs, placement):
    run_suite(suite, nprocs, "--stride", "5", env=PLACEMENTS[placement], timeout=400)


def node_bytes(placement, nprocs=4, collective="allreduce", sizes="64K,1MiB"):
    out = []
    js = f"/tmp/lpmpi-node-bytes-{placement}-{nprocs}-{collective}.json"
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-m", "lpmpi.bench", "--node-bytes",
           "--collective", collective, "--sizes", sizes, "--root", "1", "--json", js]
    rc, out, _ = run(cmd, child_env(PLACEMENTS[placement]), 180)
    assert rc == 0, out[-6000:]
    with open(js) as f:
        doc = json.load(f)
    return doc, out


@needs_mpich
@pytest.mark.parametrize("collective", ["allreduce", "reduce", "bcast"])
def test_lp_crosses_each_node_boundary_once_whatever_the_placement(collective):
    got = {}
    for placement in PLACEMENTS:
        doc, out = node_bytes(placement, collective=collective)
        nodes = doc["node_bytes"][0]["nodes"]
        want = [0, 1, 0, 1] if placement == "roundrobin" else [0, 0, 2, 2]
        assert nodes == want, (placement, nodes)
        assert "node of rank 0" in out
        got[placement] = {(r["label"], r["nbytes"]): r["bytes_per_rank"] for r in doc["node_bytes"]}
    for (label, n), rr in got["roundrobin"].items():
        blk = got["block"][(label, n)]
        if label == "native":
            assert rr is None and blk is None                     # MPI's own: not counted
            continue
        if label in ("lp", "ring"):
            # the same bytes between the nodes, rank by rank up to the renaming of the ranks
            assert sorted(rr) == sorted(blk), (label, n, rr, blk)
        if label == "lp":
            # a chain crosses the boundary once: one rank per node sends across, at most n
            # (allreduce: the two half-message chains, each crossing once)
            assert max(rr) <= n and sum(x > 0 for x in rr) <= 2, (collective, n, rr)


@needs_mpich
@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("nprocs", (3, 4), ids=lambda p: f"P{p}")
def test_the_models_network_count_is_what_the_engine_sends(nprocs, placement):
    """The cost model's network term (lpmpi.model.net_traffic, src/alg/traffic.c: each algorithm's
    pattern) counts, node by node, exactly the bytes the engine's transfers send to other nodes,
    for every lpmpi algorithm of every collective, root 1, both placements."""
    doc, _ = node_bytes(placement, nprocs, "all", "64K,1MiB")
    rows = doc["node_bytes"]
    checked = set()
    for r in rows:
        model = r["model_bytes_per_node"]
        assert len(model) == len(set(r["nodes"])) == 2, r
        if r["bytes_per_node"] is None:                       # the MPI library's own
            assert r["algorithm"] == "native", r
            continue
        for sent, want in zip(r["bytes_per_node"], model):
            assert sent == pytest.approx(want, abs=4 * nprocs), (r["collective"], r["label"], r["nbytes"], r)
        checked.add((r["collective"], r["algorithm"]))
    from lpmpi import _core, engine
    every = {(c, a) for c in engine.COLLECTIVES for a in _core.algorithms(c) if a != "native"}
    assert checked == every, every - checked


@needs_mpich
@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("cases", ("move_cases.py", "blocks_cases.py"))
def test_block_collectives_on_two_emulated_nodes(placement, cases):
    """Every matrix case of the collectives with a block per rank (tests/move_cases.py,
    tests/blocks_cases.py) at P = 3 over two emulated nodes, unsampled: the ring follows node
    order, so its position i carries rank order[i]'s block (a ring that took position i for
    rank i put round-robin ranks' blocks in each other's places, issue 38 to 39)."""
    import sys
    from pathlib import Path
    cmd = [mpiexec(), "-n", "3", sys.executable, "-u", str(Path(__file__).with_name(cases))]
    rc, out, _ = run(cmd, child_env(PLACEMENTS[placement]), 600)
    assert rc == 0 and "failures=0" in out, out[-6000:]
