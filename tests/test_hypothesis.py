"""Property tests: hypothesis draws (collective, P in 1..4, algorithm, dtype, op, shape,
chunk_bytes, root, in-place mode, seed); the examples are written to a JSON file and ONE
mpiexec spawn per P runs them all against numpy (tests/mpi_cases.py cases).

Derandomized, so a CI run is reproducible; a failing case prints its description (and seed),
which mpi_cases.py can rerun:  mpiexec -n P python tests/mpi_cases.py cases --cases FILE.
"""
import json

import pytest
from _mpi import run_suite
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.mpi

try:
    import ml_dtypes  # noqa: F401

    HAVE_BF16 = True
except ImportError:
    HAVE_BF16 = False

N_EXAMPLES = 200
ALGS = {
    "allreduce": ["lp", "mst", "be", "ring", "native", "auto"],
    "reduce": ["lp", "mst", "be", "native", "auto"],
    "bcast": ["lp", "mst", "be", "native", "auto"],
}
MODES = {
    "allreduce": ["new", "out", "inplace", "same"],
    "reduce": ["new", "out", "out_root", "inplace", "same", "mixed"],
    "bcast": ["buf"],
}
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"] + \
    (["bfloat16"] if HAVE_BF16 else [])
KIND = {"bool": "b", "float16": "f", "float32": "f", "float64": "f", "bfloat16": "f",
        "complex64": "c", "complex128": "c"}
VALID = {
    "b": ["max", "min", "land", "lor", "lxor", "band", "bor", "bxor"],
    "i": ["sum", "prod", "max", "min", "land", "lor", "lxor", "band", "bor", "bxor"],
    "f": ["sum", "prod", "max", "min", "avg"],
    "c": ["sum", "prod", "avg"],
}


def pick(draw, seq):
    """Uniform-ish choice (sampled_from favours the first elements, which would leave the
    later dtypes and algorithms nearly untested in a sweep of this size)."""
    v = draw(st.integers(0, 2**64 - 1))
    h = (v * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & (2**64 - 1)  # spread small values
    return seq[(h >> 24) % len(seq)]


@st.composite
def case(draw):
    P = pick(draw, [1, 2, 3, 4])
    coll = pick(draw, ["allreduce", "reduce", "bcast"])
    dtype = pick(draw, DTYPES)
    limit = 600 if P <= 2 else 150
    if pick(draw, [0, 1, 2, 3]):
        shape = [draw(st.integers(0, limit))]
    else:
        shape = draw(st.lists(st.integers(0, 9), min_size=0, max_size=3))
    c = {"P": P, "coll": coll, "alg": pick(draw, ALGS[coll]), "dtype": dtype,
         "op": None if coll == "bcast" else pick(draw, VALID[KIND.get(dtype, "i")]),
         "spell": pick(draw, [0, 1, 2]), "shape": shape,
         "chunk": draw(st.one_of(st.none(), st.integers(1, 48), st.integers(49, 5000))),
         "mode": pick(draw, MODES[coll]), "root": pick(draw, list(range(P))),
         "seed": draw(st.integers(0, 2**32 - 1))}
    if dtype == "uint8" and draw(st.booleans()):
        c["buf"] = "bytearray"
        c["shape"] = [int(sum(shape))]
    return c


def collect(n):
    out = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case())
    def gather(c):
        out.append(c)

    gather()
    return out


@pytest.fixture(scope="module")
def cases_file(tmp_path_factory):
    cases = collect(N_EXAMPLES)
    path = tmp_path_factory.mktemp("hypothesis") / "cases.json"
    path.write_text(json.dumps(cases, indent=0))
    return path, cases


@pytest.mark.parametrize("nprocs", (1, 2, 3, 4), ids=lambda p: f"P{p}")
def test_hypothesis_cases(cases_file, nprocs):
    path, cases = cases_file
    mine = [c for c in cases if c["P"] == nprocs]
    if not mine:
        pytest.skip(f"hypothesis drew no case with P={nprocs}")
    out = run_suite("cases", nprocs, "--cases", str(path), timeout=240)
    assert f" cases={len(mine)} " in out, f"expected {len(mine)} cases to run:\n{out[-2000:]}"
