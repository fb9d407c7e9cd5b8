"""Compression (issue 49, docs/compression.md): the codecs bit for bit against a numpy model of
the formats, the same bits from every instruction set, the bounds of two roundings against a
float64 reference at P = 1..5 (tests/compress_cases.py), the error not growing with P, a
mutation (partial sums re-encoded, as a ring would) caught, and the errors of bad arguments on
every rank before any communication."""
import re
import subprocess
import sys

import numpy as np
import pytest
from _mpi import NPROCS, TESTS, child_env, mpiexec, run

import lpmpi
from lpmpi import _core

BLOCK = 256


# ---------------------------------------------------------------- a numpy model of the formats
def model_encode(comp, x):
    """The wire bytes of the contract's formats, written out with numpy (float32 arithmetic)."""
    if x.dtype != np.float32:
        x = x.astype(np.float32)
    if comp == "bf16":
        u = x.view(np.uint32)
        r = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        nan = (((u >> 16) & 0x8000) | 0x7FC0).astype(np.uint16)
        return np.where((u & 0x7FFFFFFF) > 0x7F800000, nan, r).view(np.uint8)
    qmax = np.float32(127.0 if comp == "int8" else 7.0)
    out = []
    for b in range(0, x.size, BLOCK):
        blk = x[b:b + BLOCK]
        amax = np.abs(blk).max(initial=np.float32(0))
        if not np.isfinite(amax):
            scale, inv = np.float32(np.nan), np.float32(0)
        elif amax == 0:
            scale, inv = np.float32(0), np.float32(0)
        else:
            scale = np.float32(amax / qmax)
            inv = np.float32(np.float32(1) / scale)
        q = np.zeros(blk.size, np.int8) if not np.isfinite(scale) else np.rint(blk * inv).astype(np.int8)
        if comp == "int4":
            q4 = (q & 0xF).astype(np.uint8)
            if q4.size % 2:
                q4 = np.append(q4, np.uint8(0))
            q = (q4[0::2] | (q4[1::2] << 4)).astype(np.uint8)
        out += [np.array([scale], np.float32).view(np.uint8), q.view(np.uint8)]
    return np.concatenate(out) if out else np.zeros(0, np.uint8)


@pytest.mark.parametrize("comp", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 1000, 4099])
def test_the_codecs_write_the_contracts_formats(comp, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    x[n // 2:n // 2 + 3] = 0.0
    if n > 300:
        x[BLOCK:2 * BLOCK] = 0.0                      # a zero block
        x[2 * BLOCK + 5] = np.nan                     # a NaN block
        x[3 * BLOCK + 1] = np.inf
    w = _core._cz_encode(comp, x)
    assert np.array_equal(w, model_encode(comp, x)), comp
    y = _core._cz_decode(comp, w, np.empty_like(x))
    if comp == "bf16":
        want = (model_encode(comp, x).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        want = np.empty(n, np.float32)
        off = 0
        for b in range(0, n, BLOCK):
            m = min(BLOCK, n - b)
            scale = w[off:off + 4].view(np.float32)[0]
            raw = w[off + 4:off + 4 + (m if comp == "int8" else (m + 1) // 2)]
            if comp == "int8":
                q = raw.view(np.int8).astype(np.float32)
            else:
                lo = (raw.astype(np.int16) << 12).astype(np.int16) >> 12
                hi = (raw.astype(np.int8).astype(np.int16)) >> 4
                q = np.stack([lo, hi], 1).ravel()[:m].astype(np.float32)
            want[b:b + m] = q * scale
            off += 4 + (m if comp == "int8" else (m + 1) // 2)
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32)) or np.array_equal(np.isnan(y), np.isnan(want))
    same = ~np.isnan(want)
    assert np.array_equal(y[same], want[same])
    if n > 300:                                       # zero block exact; NaN / Inf blocks NaN
        assert np.all(y[BLOCK:2 * BLOCK] == 0)
        if comp != "bf16":
            assert np.all(np.isnan(y[2 * BLOCK:3 * BLOCK])) and np.all(np.isnan(y[3 * BLOCK:4 * BLOCK]))
        else:
            assert np.isnan(y[2 * BLOCK + 5]) and np.isinf(y[3 * BLOCK + 1])


@pytest.mark.parametrize("comp", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("offset", [0, 1])
def test_a_result_past_the_caches_decodes_with_streaming_stores_the_same(comp, offset):
    """A decode into at least lp_nt_rule.stream_min bytes (32 MiB) writes with streaming stores
    (codec.c): the same values as the plain decode of the same bytes in smaller pieces, an
    output not 16-byte aligned (offset 1 element) too, a last block shorter."""
    n = (32 << 20) // 4 + 3 * BLOCK + 77
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    x[7 * BLOCK:8 * BLOCK] = 0.0
    w = _core._cz_encode(comp, x)
    buf = np.empty(n + offset, np.float32)
    big = _core._cz_decode(comp, w, buf[offset:])
    piece = 1 << 20                                   # elements: whole blocks, below the rule
    per = _core._cz_bytes(comp, piece)
    for k, b in enumerate(range(0, n, piece)):
        m = min(piece, n - b)
        part = _core._cz_decode(comp, w[k * per:k * per + _core._cz_bytes(comp, m)], np.empty(m, np.float32))
        assert np.array_equal(big[b:b + m].view(np.uint32), part.view(np.uint32)), (comp, b)


def test_every_instruction_set_gives_the_same_bits(tmp_path):
    """The AVX-512, AVX2 and baseline codecs (LPMPI_CODEC_ISA) write and read the same bits, for
    every format and data type: ranks on different CPUs agree."""
    code = (
        "import numpy as np, sys, ml_dtypes\n"
        "from lpmpi import _core\n"
        "rng = np.random.default_rng(3)\n"
        "out = [_core._cz_isa()]\n"
        "for dt in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16):\n"
        "    x = (rng.standard_normal(5003) * 10.0 ** rng.uniform(-4, 4, 5003)).astype(dt)\n"
        "    for comp in ('bf16', 'int8', 'int4'):\n"
        "        if comp == 'bf16' and np.dtype(dt).itemsize <= 2: continue\n"
        "        w = _core._cz_encode(comp, x)\n"
        "        y = _core._cz_decode(comp, w, np.empty(x.size, np.float32 if dt != np.float64 else np.float64))\n"
        "        out.append(w.tobytes().hex()[:64] + str(hash(w.tobytes())) + str(hash(y.tobytes())))\n"
        "print(repr(out))\n")
    seen = {}
    for isa in ("scalar", "avx2", "avx512"):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env=child_env({"LPMPI_CODEC_ISA": isa, "PYTHONHASHSEED": "0"}), cwd=str(TESTS), check=False)
        assert p.returncode == 0, p.stderr
        got = eval(p.stdout)                                              # our own repr
        seen[got[0]] = got[1:]
    assert "scalar" in seen, seen.keys()
    first = next(iter(seen.values()))
    for isa, v in seen.items():
        assert v == first, f"{isa} differs"
    print("instruction sets compared:", sorted(seen))


# ---------------------------------------------------------------- the collectives at P = 1..5
@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", NPROCS)
def test_within_the_bound_and_the_same_on_every_rank(nprocs):
    """Every form, data type and compression within the two-roundings bound (and the tight one:
    what the inputs' one encoding lost plus the result's one rounding) against float64; the same
    bits on every rank and from a second run; zero blocks zero; NaN stays NaN.  P >= 3 runs the
    quick matrix (oversubscribed here)."""
    args = [] if nprocs <= 2 else ["--quick"]
    rc, out, _ = run([mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(TESTS / "compress_cases.py"), *args],
                     child_env(), 900)
    assert rc == 0 and re.search(rf"SUMMARY suite=compress P={nprocs} cases=\d+ failures=0", out), out[-6000:]
    worst = {m.group(1): float(m.group(2)) for m in re.finditer(r"STAT comp=(\w+) P=\d+ worst_error_over_bound=(\S+)",
                                                                 out)}
    # the error does not grow with P: it stays within the bound of two roundings at every P
    assert all(v <= 1.0 for v in worst.values()), worst


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,nodes", [(2, 2), (4, 2), (4, 4), (9, 9)], ids=["2x1", "2x2", "4x1", "9x1"])
def test_several_nodes_exact_within_encoded_across(nprocs, nodes):
    """Nodes of one and of two ranks (MPICH's MPIR_CVAR_NUM_CLIQUES: nodes without a network):
    allreduce runs hierarchically, in pieces (exact within the node, encoded across), within the
    bound and the same on every rank, its two forms (chained lanes; the wavefront, which 9
    nodes take and a test knob forces elsewhere) the same bits; the other collectives as on one
    node.  (In the box: test_cluster's compression test.)"""
    rc, out, _ = run([mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(TESTS / "compress_cases.py"),
                      "--quick"], child_env({"MPIR_CVAR_NUM_CLIQUES": str(nodes)}), 900)
    assert f"LAYOUT nodes={nodes} hierarchical=True" in out, out[-3000:]
    assert rc == 0 and re.search(rf"SUMMARY suite=compress P={nprocs} cases=\d+ failures=0", out), out[-6000:]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [3, 5])
def test_a_ring_that_re_encodes_partial_sums_is_caught(nprocs):
    """The mutation the design forbids (partial sums rounded again at every hop: a test knob of
    the engine) fails the tight bound: the tests would catch it."""
    rc, out, _ = run([mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(TESTS / "compress_cases.py"),
                      "--mutate"], child_env(), 300)
    assert rc == 0 and "MUTATION-DETECTED" in out, out[-4000:]


# ---------------------------------------------------------------- bad arguments, locally
@pytest.mark.parametrize("bad,exc,words", [
    ({"compression": "int16"}, ValueError, "compression must be None or one of"),
    ({"compression": "bf16", "x": np.ones(4, np.float16)}, TypeError, "narrower"),
    ({"compression": "int8", "x": np.ones(4, np.int32)}, TypeError, "floating data"),
    ({"compression": "int8", "x": np.ones(4, np.complex64)}, TypeError, "floating data"),
    ({"compression": "int8", "op": "max"}, TypeError, "sum and avg"),
    ({"compression": "int8", "algorithm": "ring"}, ValueError, "algorithm 'auto' or 'direct'"),
    ({"compression": None, "algorithm": "direct"}, ValueError, "compressed calls only"),
    ({"compression": "int8", "acc_dtype": "float32", "x": np.ones(4, np.float16)}, TypeError, "acc_dtype"),
])
def test_bad_arguments_raise_before_anything(bad, exc, words):
    x = bad.pop("x", np.arange(8, dtype=np.float32))
    y = np.full(x.shape, -1, x.dtype)
    with pytest.raises(exc, match=words):
        lpmpi.allreduce(x, y, **bad)
    assert np.all(y == -1)
    if "op" not in bad and "acc_dtype" not in bad:
        with pytest.raises(exc, match=words):
            lpmpi.allgather(x, **bad)


def test_compression_only_where_it_applies():
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError):
        lpmpi.bcast(x, compression="int8")             # not a parameter of bcast
    assert "direct" not in lpmpi.algorithms("allreduce")   # compressed calls only
    assert lpmpi.allreduce(x, compression="int8")[0] == 1   # P = 1: exact


def test_every_form_takes_it():
    x = np.arange(300, dtype=np.float32)
    for f in (lpmpi.iallreduce, lpmpi.iallgather, lpmpi.ireduce_scatter):
        assert f(x, compression="int4").wait() is not None
    for f in (lpmpi.allreduce_init, lpmpi.allgather_init, lpmpi.reduce_scatter_init):
        r = f(x, compression="bf16")
        r.start()
        r.wait()
        r.free()


def test_check_compares_the_compression(tmp_path):
    """LPMPI_CHECK=1: ranks that pass different compressions raise MismatchError naming it."""
    script = tmp_path / "mm.py"
    script.write_text("import numpy as np, lpmpi\nfrom mpi4py import MPI\nr = MPI.COMM_WORLD.rank\n"
                      "try:\n    lpmpi.allreduce(np.ones(1000, np.float32), compression=('int8', 'int4')[r])\n"
                      "    print('NOT RAISED', flush=True)\nexcept lpmpi.MismatchError as e:\n"
                      "    print('MISMATCH', e, flush=True)\n")
    rc, out, _ = run([mpiexec(), "-n", "2", sys.executable, str(script)], child_env({"LPMPI_CHECK": "1"}), 120)
    assert rc == 0 and out.count("MISMATCH") == 2 and "compression" in out, out[-3000:]


def test_explain_and_select_of_a_compressed_call():
    """explain()/select() with compression=: the schedule, the bytes on the wire (int8: 0.254 of
    float32), one node: nothing crosses a network; bad arguments raise naming them."""
    e = lpmpi.explain("allreduce", 1 << 20, compression="int8")
    assert e.algorithm == "direct" and "encode to 266240 B (0.254 of the data)" in e.compression, e.compression
    assert lpmpi.select("allreduce", 1 << 20, compression="int8") == ("direct", None)
    assert "0.500" in lpmpi.explain("allgather", 1 << 20, compression="bf16").compression
    with pytest.raises(ValueError, match="compression must be None or one of"):
        lpmpi.explain("allreduce", 1 << 20, compression="int16")
    with pytest.raises(TypeError, match="acc_dtype"):
        lpmpi.explain("allreduce", 1 << 20, compression="int8", acc_dtype="float32")
    with pytest.raises(ValueError, match="not 'bcast'"):
        lpmpi.explain("bcast", 1 << 20, compression="int8")
    with pytest.raises(ValueError, match="nbytes must be a non-negative int"):
        lpmpi.explain("allreduce", np.ones(3), compression="int8")
    with pytest.raises(ValueError, match="itemsize must be a positive int"):
        lpmpi.explain("allreduce", 1 << 20, compression="int8", itemsize=0)
