"""The cost model: the engine's alpha-beta-gamma formulas (src/alg/registry.c) against hand-computed
values, the LP chunk minimising the registry's cost, the least-squares fit, and a real fit at P = 2."""
import json
import math
import sys

import pytest
from _mpi import child_env, mpiexec, run

from lpmpi import _core, model

A, B, G = 2e-6, 1e-9, 5e-10          # alpha s, beta s/B, gamma s/B
N, C = 1 << 20, 1 << 16              # 1 MiB message, 64 KiB chunks


@pytest.fixture
def known_model():
    saved = _core.model_get()
    _core.model_set(A, B, G)
    yield
    _core.model_set(*saved)


# (collective, algorithm, P, n, chunk) -> seconds, written out by hand from registry.c
HAND = {
    # lp: (K + P - 2) steps of one chunk; allreduce: two chains of K = n/(2c) chunks, a middle
    # rank's one port carries 2n (n at P = 2) and reduces n (n/2), plus 2P - 3 hops of fill
    ("bcast", "lp", 4, N, C): (16 + 2) * (A + C * B),
    ("reduce", "lp", 4, N, C): (16 + 2) * (A + C * (B + G)),
    ("allreduce", "lp", 4, N, C): (8 + 5) * A + 2 * N * (B + G / 2) + 5 * C * (B + G),
    ("allreduce", "lp", 2, N, C): (8 + 1) * A + N * (B + G / 2) + 1 * C * (B + G),
    ("bcast", "lp", 4, 1000, C): (1 + 2) * (A + 1000 * B),              # chunk > message
    # mst: ceil(log2 P) rounds of the whole message
    ("bcast", "mst", 4, N, None): 2 * (A + N * B),
    ("reduce", "mst", 5, N, None): 3 * (A + N * (B + G)),
    ("allreduce", "mst", 4, N, None): 2 * (A + N * (B + G)) + 2 * (A + N * B),
    # be: Rabenseifner over q = 4 ranks (f = 3/4), plus the fold for P = 5
    ("allreduce", "be", 4, N, None): 4 * A + 1.5 * N * B + 0.75 * N * G,
    ("allreduce", "be", 5, N, None): 4 * A + 1.5 * N * B + 0.75 * N * G + 2 * (A + N * B) + N * G,
    ("reduce", "be", 5, N, None): 4 * A + 1.5 * N * B + 0.75 * N * G + (2 * (A + N * B) + N * G) / 2,
    ("bcast", "be", 4, N, None): (2 + 2) * A + 2 * 0.75 * N * B,
    ("bcast", "be", 5, N, None): (3 + 4) * A + 2 * 0.8 * N * B,
    # ring: (P-1)(K+1) messages of blocks n/P sent in chunks; 2(P-1) block moves, (P-1) reductions
    ("allreduce", "ring", 4, N, C): 3 * (4 + 1) * A + 6 * (N / 4) * B + 3 * (N / 4) * G,
    # native: MPICH's choice, half the latency for small messages, as be above 2 KiB
    ("allreduce", "native", 4, 1024, None): 2 * (0.5 * A + 1024 * (B + G)),
    ("bcast", "native", 4, 2048, None): 2 * (0.5 * A + 2048 * B),
    ("reduce", "native", 4, N, None): 4 * A + 1.5 * N * B + 0.75 * N * G,
    # one rank: a copy
    ("allreduce", "lp", 1, N, C): N * B,
}


@pytest.mark.parametrize("key", list(HAND), ids=lambda k: "-".join(map(str, k)))
def test_engine_formulas_match_hand_computed(known_model, key):
    coll, alg, P, n, c = key
    assert model.predict(coll, alg, P, n, c) == pytest.approx(HAND[key], rel=1e-12)


def test_predict_all_and_best_chunk(known_model):
    preds = model.predict_all("allreduce", 4, N)
    assert [p[2] for p in preds] == sorted(p[2] for p in preds)
    assert {p[0] for p in preds} == set(_core.algorithms("allreduce"))
    best = model.best_chunk("reduce", "lp", 4, N)
    assert best in model.grid_chunks(N)
    # no power of two in range does better than the engine's pick
    assert all(model.predict("reduce", "lp", 4, N, best) <= model.predict("reduce", "lp", 4, N, c)
               for c in model.grid_chunks(N))
    assert model.best_chunk("reduce", "mst", 4, N) is None


@pytest.mark.parametrize("coll", ["reduce", "bcast", "allreduce"])
@pytest.mark.parametrize("P, n", [(2, 1 << 20), (4, 1 << 26), (16, 12345678)])
def test_optimal_chunk_minimises_the_registry_cost(known_model, coll, P, n):
    """The one LP formula (registry.c), minimised numerically: no neighbour does better, and
    for reduce (K + P - 2)(alpha + c (beta + gamma)) it is the closed form
    sqrt(n alpha / ((P - 2)(beta + gamma))) up to the steps of ceil(n / c), which make the
    cost flat near its minimum (within 15% of it, as cheap within 0.5%) for P > 2."""
    b = model.optimal_chunk(coll, "lp", P, n)
    assert 1 <= b <= n

    def cost(x):
        return model.predict(coll, "lp", P, n, x)

    assert all(cost(b) <= cost(b * f) * (1 + 1e-9) for f in (0.5, 0.9, 0.99, 1.01, 1.1, 2.0))
    if coll == "reduce" and P > 2:
        closed = math.sqrt(n * A / ((P - 2) * (B + G)))
        assert b == pytest.approx(closed, rel=0.15)
        assert cost(b) <= cost(closed) * 1.005


def test_optimal_chunk_edges(known_model):
    assert model.optimal_chunk("reduce", "lp", 1, 1000) == 1000
    assert model.optimal_chunk("bcast", "lp", 64, 100) <= 100       # never beyond the message
    assert model.optimal_chunk("reduce", "mst", 4, 1 << 20) is None  # unchunked
    with pytest.raises(ValueError):
        model.optimal_chunk("bcast", "ring", 4, 1 << 20)


def test_grid_and_pow2_chunk():
    assert model.grid_chunks(8) == [1024]
    assert model.grid_chunks(3000) == [1024, 2048]
    assert model.grid_chunks(1 << 30)[-1] == 1 << 24
    assert model.pow2_chunk(90_000, 1 << 20) == 1 << 16
    assert model.pow2_chunk(10, 1 << 20) == 1024 and model.pow2_chunk(1 << 30, 1 << 20) == 1 << 20
    g = model.grid("allreduce", 1 << 20)
    chunked = [a for a, _, c in _core._algorithm_info("allreduce") if c]
    assert len(g) == len(_core.algorithms("allreduce")) - len(chunked) + len(chunked) * 11


def test_fit_alpha_beta_recovers_a_line():
    times = {n: 3e-6 + n * 2e-10 for n in model.PINGPONG_SIZES}
    alpha, beta = model.fit_alpha_beta(times)
    assert alpha == pytest.approx(3e-6, rel=1e-6) and beta == pytest.approx(2e-10, rel=1e-6)
    with pytest.raises(ValueError):
        model.fit_alpha_beta({1024: 1e-6})


def test_install_rejects_nonsense():
    with pytest.raises(ValueError):
        model.install(model.Model(-1.0, 1e-9, 1e-9))
    with pytest.raises(ValueError):
        model.install(model.Model(1e-6, math.nan, 1e-9))
    with pytest.raises(ValueError, match="together"):
        model.install(model.Model(1e-6, 1e-9, 1e-9, alpha_net=1e-5))
    with pytest.raises(ValueError):
        model.install(model.Model(1e-6, 1e-9, 1e-9, -1.0, 1e-9))


def test_fit_at_p2_gives_every_rank_the_same_model():
    code = ("import json, lpmpi.model as m; from mpi4py import MPI; "
            "f = m.fit(sizes=(1024, 65536, 1 << 20), reps=5); "
            "import sys; sys.stdout.write('RESULT %d %s\\n' % (MPI.COMM_WORLD.rank, json.dumps([f.alpha, f.beta, f.gamma, *m.current().__dict__.values()]))); sys.stdout.flush()")
    cmd = [mpiexec(), "-n", "2", sys.executable, "-c", code]
    rc, out, _ = run(cmd, child_env(), 60)
    assert rc == 0, out[-4000:]
    got = [json.loads(line.split(None, 2)[2]) for line in out.splitlines() if line.startswith("RESULT")]
    assert len(got) == 2 and got[0] == got[1], got
    alpha, beta, gamma = got[0][:3]
    assert got[0][:3] == got[0][3:6]                           # installed
    assert got[0][6:] == list(_core.model_get_net())           # one node: the network term kept
    assert 0 <= alpha < 1e-3 and 0 < beta < 1e-7 and 0 < gamma < 1e-7, got


def test_the_network_term_prices_the_busiest_nic():
    """Across nodes a prediction adds what the algorithm's busiest NIC sends beyond the
    node-local rates: at 2 nodes x 2 ranks be sends 2n through each NIC, lp n (the chains cross
    the boundary once), so with a slow network lp wins where one node would take be; on one node
    nothing changes."""
    saved, saved_net = _core.model_get(), _core.model_get_net()
    try:
        model.install(model.Model(8e-6, 0.2e-9, 0.15e-9, 60e-6, 8e-9))    # a 1 Gbit/s network
        n = 16 << 20
        one = {a: model.predict("allreduce", a, 4, n) for a in ("lp", "be", "ring")}
        two = {a: model.predict("allreduce", a, 4, n, nodes=2) for a in ("lp", "be", "ring")}
        for a, t in one.items():
            assert two[a] > t
        assert two["be"] - model.predict("allreduce", "be", 4, n) == pytest.approx(
            2 * n * (8e-9 - 0.2e-9) + 4 * (60e-6 - 8e-6), rel=1e-6)
        assert model.predict_all("allreduce", 4, n, nodes=2)[0][0] == "lp"
        assert model.predict_all("allreduce", 4, n)[0][0] != "lp"
        # 3 nodes of one rank: the ring sends 4/3 n per NIC, lp's middle node 2n
        assert model.predict_all("allreduce", 3, n, nodes=3)[0][0] == "ring"
        # the network term is the model's count of the pattern
        b, m = model.net_traffic("allreduce", "be", model.block_layout(4, 2), n)
        assert b == [2 * n, 2 * n] and m == [4, 4]
        assert model.block_layout(5, 2) == [0, 0, 0, 3, 3] and model.block_layout(3, 3) == [0, 1, 2]
        with pytest.raises(ValueError, match="nodes"):
            model.predict("allreduce", "lp", 4, n, nodes=5)
        with pytest.raises(ValueError, match="node map"):
            model.net_traffic("allreduce", "lp", [1, 1], n)
    finally:
        _core.model_set(*saved)
        _core.model_set_net(*saved_net)


def test_a_table_carries_the_network_term(tmp_path):
    from lpmpi import tables
    doc = tables.table_document({"mpi_library": "x", "nprocs": 2, "nodes": 2}, [], {})
    doc["model"] = {"alpha": 1e-6, "beta": 1e-9, "gamma": 1e-9, "alpha_net": 5e-5, "beta_net": 8e-9}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    assert tables.read_table(p).model == (1e-6, 1e-9, 1e-9, 5e-5, 8e-9)
    del doc["model"]["beta_net"]
    p.write_text(json.dumps(doc))
    t = tables.read_table(p)
    assert t.model is None and any("alpha_net without beta_net" in s for s in t.skipped), t.skipped
