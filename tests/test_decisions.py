"""Every rank takes the same decision from the same call, under every shipped table (issue 37).

tests/decision_cases.py asks the engine, on every rank, what each call of a matrix (collective x
dtype x acc_dtype x op x count around every row boundary x root x in place x form) would run,
under the cost model and under the shipped tables of every machine they were measured on
(LPMPI_TABLES_AS's selection, whatever CPU this runs on), and compares the answers.
"""
import re
import sys

import pytest
from _mpi import TESTS, child_env, format_failure, mpiexec, run, run_split

CASES = TESTS / "decision_cases.py"


def _spawn(nprocs, *args, env=None, timeout=300):
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(CASES), *args]
    rc, out, _ = run(cmd, child_env(env), timeout)
    return cmd, rc, out


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,memory", [(2, "host"), (2, "device"), (3, "host")],
                         ids=["P2-host", "P2-device", "P3-host"])
def test_every_rank_decides_alike_under_every_shipped_table(nprocs, memory):
    env = {"LPMPI_EMULATE_STAGING": "1"} if memory == "device" else None
    cmd, rc, out = _spawn(nprocs, env=env)
    if rc != 0:
        pytest.fail(format_failure(cmd, env, rc, out, 300), pytrace=False)
    summaries = [ln for ln in out.splitlines() if ln.startswith("SUMMARY profile=")]
    # the cost model and one profile per machine of the shipped tables (7 tables, 6 machines)
    names = {re.search(r"profile=(\S+)", ln).group(1) for ln in summaries}
    assert "model" in names and len(names) >= 7, out[-3000:]
    for ln in summaries:
        assert "failed=0" in ln, ln
        if "profile=model" not in ln:
            assert "rows=0" not in ln, f"a profile that applied no table: {ln}"
    total = re.search(r"SUMMARY all P=\d+ cases=(\d+) failed=0", out)
    assert total and int(total.group(1)) > 50000, out[-3000:]


@pytest.mark.mpi
def test_the_harness_reports_a_disagreement():
    """--skew: the last rank asks about one element more: every case must be reported."""
    _, rc, out = _spawn(2, "--profiles", "model", "--skew")
    assert rc not in (0, None), out[-3000:]
    m = re.search(r"SUMMARY profile=model P=2 memory=host tables=\[\] rows=0 cases=(\d+) failed=(\d+)", out)
    assert m and m.group(1) == m.group(2), out[-3000:]
    assert "FAIL profile=model" in out


DEBUG_SCRIPT = """
import numpy as np, ml_dtypes, lpmpi
from lpmpi import _core
from mpi4py import MPI
c = MPI.COMM_WORLD
x = np.ones(1000, np.float32)
d = _core.call_decision("allgather", x)
lpmpi.allgather(x)
h = np.ones(7, ml_dtypes.bfloat16)
e = _core.call_decision("reduce", lpmpi.IN_PLACE, h, root=1, acc_dtype="float32")
lpmpi.reduce(lpmpi.IN_PLACE, h, root=1, acc_dtype="float32")
if c.rank == 0:
    print("DECISION", d["algorithm"], d["key"][2], e["algorithm"], e["key"][2], flush=True)
"""


@pytest.mark.mpi
def test_debug_line_reports_the_engines_own_key(tmp_path):
    """LPMPI_DEBUG=1 reports the decision of the call's own key: an allgather of 1000 float32 is
    keyed by its P blocks (8000 B at P = 2), a bfloat16 reduce with acc_dtype by its float32
    copy (28 B, marked); the same algorithm as the call's decision (under the Xeon's tables,
    where the acc_dtype table applies)."""
    script = tmp_path / "debug.py"
    script.write_text(DEBUG_SCRIPT)
    env = {"LPMPI_DEBUG": "1", "LPMPI_TABLES_AS": "mpich-P2-host.json"}
    cmd = [mpiexec(), "-n", "2", sys.executable, "-u", str(script)]
    rc, out, err = run_split(cmd, child_env(env), 120)
    assert rc == 0, (out + err)[-3000:]
    dec = next(ln for ln in out.splitlines() if ln.startswith("DECISION")).split()
    for rank in (0, 1):               # every rank's decision, each line naming its rank
        ag = re.search(rf"lpmpi: rank {rank}: allgather[^\n]*?\]", err).group(0)
        rd = re.search(rf"lpmpi: rank {rank}: reduce[^\n]*?\]", err).group(0)
        assert dec[2] == "8000" and "allgather 8000 B" in ag and f": {dec[1]}" in ag, (dec, ag)
        assert dec[4] == "28" and "reduce 28 B (acc_dtype float32)" in rd and f": {dec[3]}" in rd, (dec, rd)


NODES_SCRIPT = """
import numpy as np, lpmpi
from lpmpi import _core
from mpi4py import MPI
c = MPI.COMM_WORLD
lpmpi.allreduce(np.ones(4, np.float32))          # prepares COMM_WORLD's context (its nodes)
srcs = sorted({_core.call_decision("allreduce", np.empty(n, np.float32))["source"]
               for n in (256, 1 << 18, 1 << 22)})
d = _core.call_decision("allreduce", np.empty(1 << 18, np.float32))
if c.rank == 0:
    print("NODES", d["key"][5], ",".join(srcs), flush=True)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("cliques", [1, 2])
def test_a_one_node_table_never_decides_across_nodes(tmp_path, cliques):
    """The shipped tables were measured on one node: on a communicator of two nodes (MPICH's
    emulated cliques) their rows do not apply and the model decides; on one node they do."""
    script = tmp_path / "nodes.py"
    script.write_text(NODES_SCRIPT)
    env = {"LPMPI_TABLES_AS": "mpich-P2-host-epyc.json"}
    if cliques > 1:
        env["MPIR_CVAR_NUM_CLIQUES"] = str(cliques)
    cmd = [mpiexec(), "-n", "2", sys.executable, "-u", str(script)]
    rc, out, err = run_split(cmd, child_env(env), 120)
    assert rc == 0, (out + err)[-3000:]
    nodes, srcs = next(ln for ln in out.splitlines() if ln.startswith("NODES")).split()[1:]
    assert int(nodes) == cliques, out
    assert srcs == ("model" if cliques > 1 else "table"), out
