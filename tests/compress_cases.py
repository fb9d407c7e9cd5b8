"""Compressed collectives under mpiexec (tests/test_compress.py runs it at P = 1..5 and in the
box): one spawn runs the matrix, prints a line per failing case, STAT lines and a SUMMARY.

    mpiexec -n 3 python tests/compress_cases.py [--quick] [--mutate]

Cases: compression bf16 / int8 / int4 x float32, float64, float16, bfloat16 data (bf16 only
where narrower) x allreduce (blocking, nonblocking, persistent, in place, AVG), reduce_scatter
(equal blocks, counts), allgather x counts 1, 255, 257 (blocks straddling the segments),
1000, 4099 (on several nodes of equal ranks also in pieces: chunk_bytes) x data: normal, heavy-tailed (Cauchy), mixed magnitudes (10^-6..10^6 in one array),
with zero blocks.  Each result against a float64 reference within the bound of two roundings
(docs/compression.md: bf16 2^-8 (sum_r |x_r| + |y|); int8 (sum_r blockmax(x_r) + blockmax(y)) /
254, int4 / 14; plus float32's accumulation), bitwise identical on every rank (allreduce,
allgather) and from a second run; zero blocks exactly zero; a NaN input NaN in its element.
STAT lines: the worst error over the bound per compression, for test_compress's "the error does
not grow with P".  --mutate: the engine re-encodes its partial sums (a test knob): the bound must
then fail (prints MUTATION-DETECTED)."""
from __future__ import annotations

import sys
import traceback

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _core

W = MPI.COMM_WORLD
P, ME = W.size, W.rank
FAILS: list[str] = []
NCASES = 0
WORST: dict[str, float] = {}
BLOCK = 256
QMAX = {"int8": 127.0, "int4": 7.0}
try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:                 # pragma: no cover - ml_dtypes is in [test]
    BF16 = None


def data(kind: str, n: int, dt, rank: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(1000 * seed + rank)
    if kind == "normal":
        x = rng.standard_normal(n)
    elif kind == "heavy":
        x = np.clip(rng.standard_cauchy(n), -1e4, 1e4)
    elif kind == "mixed":
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n)
    else:                           # zero blocks: every other block zero
        x = rng.standard_normal(n)
        for b in range(0, n, 2 * BLOCK):
            x[b:b + BLOCK] = 0
    if dt in (np.float16,):          # (sums within float16's range: 65504)
        x = np.clip(x, -6e4 / (P + 1), 6e4 / (P + 1))
    return x.astype(dt)


def blocks_max(a: np.ndarray, starts) -> np.ndarray:
    """Per element: the max |a| of its block (blocks of 256 from each segment start)."""
    out = np.empty(a.size)
    absa = np.abs(a.astype(np.float64))
    for s, e in starts:
        for b in range(s, e, BLOCK):
            out[b:min(b + BLOCK, e)] = absa[b:min(b + BLOCK, e)].max(initial=0)
    return out


def segments(coll: str, n: int, counts=None):
    """The runs the engine encodes independently (its blocks start at each run's start)."""
    if coll == "allreduce":
        S = -(-n // P)
        S = -(-S // BLOCK) * BLOCK
        return [(min(j * S, n), min((j + 1) * S, n)) for j in range(P)]
    if counts is not None:
        c = np.concatenate([[0], np.cumsum(counts)])
        return [(int(c[j]), int(c[j + 1])) for j in range(P)]
    return [(j * n, (j + 1) * n) for j in range(P)]


def bound(comp: str, xs, ref: np.ndarray, starts, result_rounded: bool, dt) -> np.ndarray:
    """The per-element bound of the contract (float64), for inputs xs (one per rank)."""
    x64 = [x.astype(np.float64).ravel() for x in xs]
    absum = np.sum([np.abs(x) for x in x64], axis=0)
    if comp == "bf16":
        b = 2.0 ** -8 * absum
        if result_rounded:
            b += 2.0 ** -8 * (np.abs(ref) + b)
    else:
        q = QMAX[comp]
        b = np.sum([blocks_max(x, starts) for x in x64], axis=0) / (2 * q)
        if result_rounded:
            b += (blocks_max(ref, starts) + blocks_max(b, starts)) / (2 * q)
    return slack(b, absum, ref, dt)


def slack(b: np.ndarray, absum: np.ndarray, ref: np.ndarray, dt) -> np.ndarray:
    """Bound b plus the float32 (float64) accumulation's error and, for 16-bit data, the
    result's rounding to the data type (of the value computed)."""
    acc_eps = 2.0 ** -52 if dt == np.float64 else 2.0 ** -23
    b = b + (P + 2) * acc_eps * (absum + np.abs(ref)) + 2.0 ** -20 * b
    if dt == np.float16:
        b = b + 2.0 ** -11 * (np.abs(ref) + b) + 6e-8
    elif BF16 is not None and dt == BF16:
        b = b + 2.0 ** -8 * (np.abs(ref) + b)
    return b


def roundtrip_error(comp: str, xs, starts) -> np.ndarray:
    """Per element: the sum over ranks of the actual error of encoding each input once (the
    codecs' own roundtrip, tested bit for bit against numpy in test_compress.py)."""
    tot = 0.0
    for x in xs:
        x = np.ascontiguousarray(x).ravel()
        d = np.empty(x.size, np.float64)
        for s, e in starts:
            if e > s:
                seg = x[s:e].astype(np.float64) if x.dtype == np.float64 else x[s:e].astype(np.float32)
                d[s:e] = _core._cz_decode(comp, _core._cz_encode(comp, seg), np.empty(e - s, seg.dtype))
        tot = tot + np.abs(d - x.astype(np.float64))
    return tot


def tight(comp: str, xs, ref: np.ndarray, starts, result_rounded: bool, dt) -> np.ndarray:
    """The bound from what the inputs' one encoding actually lost, plus the result's one
    rounding: a partial sum rounded once more (a ring's hop) breaks it."""
    e1 = roundtrip_error(comp, xs, starts)
    b = e1.copy()
    if result_rounded:
        s = np.abs(ref) + e1
        b += 2.0 ** -8 * s if comp == "bf16" else blocks_max(s, starts) / (2 * QMAX[comp])
    absum = np.sum([np.abs(x.astype(np.float64).ravel()) for x in xs], axis=0)
    return slack(b, absum, ref, dt)


def check(name: str, comp: str, got: np.ndarray, ref: np.ndarray, b: np.ndarray, xs, t=None) -> None:
    g = got.astype(np.float64).ravel()
    err = np.abs(g - ref)
    finite = np.isfinite(ref)
    for what, bb in (("bound", b), ("tight bound", t)):
        if bb is None:
            continue
        bad = finite & ~(err <= bb)
        if bad.any():
            i = int(np.argmax(bad))
            raise AssertionError(f"{name}: element {i}: got {g[i]!r} want {ref[i]!r} (error {err[i]:.3g} > {what} "
                                 f"{bb[i]:.3g}); {int(bad.sum())} of {bad.size} outside")
    if (~finite).any() and not np.all(~np.isfinite(g[~finite])):
        raise AssertionError(f"{name}: a NaN/Inf input did not give NaN/Inf in its element")
    zero = np.all([x.astype(np.float64).ravel() == 0 for x in xs], axis=0)
    if np.any(g[zero] != 0):
        raise AssertionError(f"{name}: an element zero on every rank is not zero")
    ratio = float(np.max(err[finite] / np.maximum(b[finite], 1e-300), initial=0))
    WORST[comp] = max(WORST.get(comp, 0.0), ratio)


def case(name: str, fn) -> None:
    global NCASES
    NCASES += 1
    got = None
    try:
        got = fn()
    except Exception:   # noqa: BLE001 - reported per case
        FAILS.append(f"FAIL rank={ME} case={name}: {traceback.format_exc(limit=4)}")
        print(FAILS[-1], flush=True)
    digests = [d for d in W.allgather(got) if d is not None]
    if any(d != digests[0] for d in digests):
        FAILS.append(f"FAIL rank={ME} case={name}: results differ between ranks")
        print(FAILS[-1], flush=True)


def allreduce_case(comp, dt, n, kind, form, op, seed, chunk=None):
    xs = [data(kind, n, dt, r, seed) for r in range(P)]
    x = xs[ME].copy()
    if kind == "normal" and n > 10 and seed == 1:
        for r in range(P):
            xs[r][3] = np.nan if r == 0 else xs[r][3]
        x = xs[ME].copy()
    ref = np.sum([a.astype(np.float64) for a in xs], axis=0)
    if form == "blocking":
        y = lpmpi.allreduce(x, op=op, compression=comp, chunk_bytes=chunk)
    elif form == "inplace":
        y = x.copy()
        lpmpi.allreduce(lpmpi.IN_PLACE, y, op=op, compression=comp)
    elif form == "nonblocking":
        y = lpmpi.iallreduce(x, op=op, compression=comp).wait()
    else:
        y = np.empty_like(x)
        p = lpmpi.allreduce_init(x, y, op=op, compression=comp)
        for _ in range(2):
            p.start()
            p.wait()
        p.free()
    again = lpmpi.allreduce(x, op=op, compression=comp, chunk_bytes=chunk)
    if form != "persistent" and not np.array_equal(y.view(np.uint8), again.view(np.uint8)):
        raise AssertionError("a second run gave other bits")
    starts = segments("allreduce", n)
    # the tight bound models each input encoded once: on several nodes of equal ranks the node
    # sums are (docs/compression.md), so there only the contract's bound (same 256-blocks) holds
    b, t = bound(comp, xs, ref, starts, True, dt), (None if HIER else tight(comp, xs, ref, starts, True, dt))
    if op == "avg":
        ref, b, t = ref / P, b / P, (None if t is None else t / P)
    check(f"allreduce {comp} {np.dtype(dt).name} n={n} {kind} {form} {op}", comp, y, ref, b, xs, t)
    return y.tobytes()


def reduce_scatter_case(comp, dt, n, kind, counts, seed):
    if counts:
        cnt = [n + 3 * r for r in range(P)]
        xs = [data(kind, sum(cnt), dt, r, seed) for r in range(P)]
        y = lpmpi.reduce_scatter(xs[ME], counts=cnt, compression=comp)
        starts = segments("rs", 0, cnt)
    else:
        xs = [data(kind, n * P, dt, r, seed) for r in range(P)]
        y = lpmpi.reduce_scatter(xs[ME], compression=comp)
        starts = segments("rs", n)
    ref = np.sum([a.astype(np.float64) for a in xs], axis=0)
    b, t = bound(comp, xs, ref, starts, False, dt), tight(comp, xs, ref, starts, False, dt)
    s, e = starts[ME]
    zero = [a[s:e] for a in xs]
    check(f"reduce_scatter {comp} {np.dtype(dt).name} n={n} {kind} counts={counts}", comp, y, ref[s:e], b[s:e], zero,
          t[s:e])


def allgather_case(comp, dt, n, kind, seed):
    xs = [data(kind, n, dt, r, seed) for r in range(P)]
    y = lpmpi.allgather(xs[ME], compression=comp)
    ref = np.concatenate([a.astype(np.float64) for a in xs])
    flat = [np.zeros(n * P, dt) for _ in range(P)]     # one input per element: its owner's block
    for r in range(P):
        flat[r][r * n:(r + 1) * n] = xs[r]
    b = bound(comp, flat, ref, [(r * n, (r + 1) * n) for r in range(P)], False, dt)
    check(f"allgather {comp} {np.dtype(dt).name} n={n} {kind}", comp, y, ref, b, flat)
    return y.tobytes()


def forms_agree_case(comp, dt, n, chunk):
    """The hierarchical allreduce's two forms (chained lanes; the wavefront of phases, which
    larger layouts take) give the same bits, blocking and nonblocking, in place too."""
    x = data("mixed", n, dt, ME, 3)
    got = []
    for wavefront in (False, True):
        _core._test_cz_wavefront(wavefront)
        try:
            y = lpmpi.allreduce(x, compression=comp, chunk_bytes=chunk)
            z = lpmpi.iallreduce(x, compression=comp).wait()
            v = x.copy()
            lpmpi.allreduce(lpmpi.IN_PLACE, v, compression=comp)
        finally:
            _core._test_cz_wavefront(False)
        got.append((y.tobytes(), z.tobytes(), v.tobytes()))
    if got[0] != got[1]:
        raise AssertionError("the wavefront gave other bits than the chained lanes")
    return got[0][0]


def hierarchical() -> bool:
    """Several nodes of equal ranks (one or more each): allreduce runs hierarchically, in pieces."""
    lpmpi.allreduce(np.zeros(1, np.float32))
    node = _core.comm_nodes(W, prepare=False) or [0] * P
    per = [node.count(v) for v in set(node)]
    return len(per) > 1 and len(set(per)) == 1


HIER = False


def main() -> int:
    global HIER
    HIER = hierarchical()
    if ME == 0:
        print(f"LAYOUT nodes={len(set(_core.comm_nodes(W, prepare=False) or [0]))} hierarchical={HIER}", flush=True)
    quick = "--quick" in sys.argv
    if "--mutate" in sys.argv:
        _core._test_cz_reencode(True)
        detected = 0
        for comp in ("int4", "int8", "bf16"):
            n = 4096
            xs = []
            for r in range(P):     # inputs the codec holds exactly: only the roundings after them count
                q = QMAX.get(comp, 255.0)
                x = np.random.default_rng(100 + r).integers(-int(q), int(q) + 1, n).astype(np.float32)
                x[::BLOCK] = q
                xs.append(x * (2.0 ** -4 if comp == "bf16" else 1.0))
            ref = np.sum([a.astype(np.float64) for a in xs], axis=0)
            y = lpmpi.allreduce(xs[ME], compression=comp)
            starts = segments("allreduce", n)
            t = tight(comp, xs, ref, starts, True, np.float32)
            detected += int(np.any(np.abs(y.astype(np.float64) - ref) > t))
        total = W.allreduce(detected)
        if ME == 0:
            print(f"MUTATION-DETECTED {total}" if total else "MUTATION-UNDETECTED", flush=True)
        _core._test_cz_reencode(False)
        return 0
    dts = [np.float32, np.float64, np.float16] + ([BF16] if BF16 is not None else [])
    sizes = (1, 257, 4099) if quick else (1, 255, 257, 1000, 4099)
    kinds = ("normal", "heavy", "mixed", "zeros")
    for comp in ("bf16", "int8", "int4"):
        for dt in dts:
            if comp == "bf16" and np.dtype(dt).itemsize <= 2:
                continue
            for n in sizes:
                for k, kind in enumerate(kinds):
                    if quick and k and n != 4099:
                        continue
                    forms = ("blocking", "nonblocking", "persistent", "inplace") if dt == np.float32 else ("blocking",)
                    for form in forms:
                        op = "avg" if form == "inplace" else "sum"
                        case(f"allreduce {comp} {np.dtype(dt).name} {n} {kind} {form}",
                             lambda c=comp, d=dt, m=n, kd=kind, f=form, o=op, sd=k: allreduce_case(c, d, m, kd, f, o, sd))
                    if HIER and dt == np.float32:      # in pieces (alg_compress.c)
                        for cb in (4096, 3 << 12):
                            case(f"allreduce {comp} {np.dtype(dt).name} {n} {kind} pieces of {cb} B",
                                 lambda c=comp, d=dt, m=n, kd=kind, sd=k, b=cb: allreduce_case(c, d, m, kd, "blocking",
                                                                                             "sum", sd, b))
                    for counts in (False, True):
                        case(f"reduce_scatter {comp} {np.dtype(dt).name} {n} {kind} counts={counts}",
                             lambda c=comp, d=dt, m=n, kd=kind, ct=counts, sd=k: reduce_scatter_case(c, d, m, kd, ct, sd))
                    case(f"allgather {comp} {np.dtype(dt).name} {n} {kind}",
                         lambda c=comp, d=dt, m=n, kd=kind, sd=k: allgather_case(c, d, m, kd, sd))
    if HIER:
        for comp in ("bf16", "int8", "int4"):
            for dt in (np.float32, np.float64):
                for n, cb in ((4099, None), (4099, 4096), (70001, 1 << 14), (1, None)):
                    case(f"allreduce {comp} {np.dtype(dt).name} {n} pieces of {cb} B: both forms",
                         lambda c=comp, d=dt, m=n, b=cb: forms_agree_case(c, d, m, b))
    worst = {c: W.allreduce(v, op=MPI.MAX) for c, v in sorted(WORST.items())}
    nf = W.allreduce(len(FAILS))
    if ME == 0:
        for c, v in worst.items():
            print(f"STAT comp={c} P={P} worst_error_over_bound={v:.4f}", flush=True)
        print(f"SUMMARY suite=compress P={P} cases={NCASES} failures={nf}", flush=True)
    return 1 if nf else 0


if __name__ == "__main__":
    sys.exit(main())
