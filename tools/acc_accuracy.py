"""Accuracy of float16 / bfloat16 sums with and without ``acc_dtype="float32"``, per algorithm.

    mpiexec -n P python tools/acc_accuracy.py [--n 200000] [--json PATH]    # P = 2 .. 8

Every rank draws ``--n`` standard-normal gradients (seeded by rank; every rank regenerates all
ranks' inputs, so each computes the reference itself), rounds them to the 16-bit type, and
allreduces them (SUM) with every algorithm, without and with ``acc_dtype="float32"``.  The
reference is the float64 sum of the 16-bit inputs, rounded once to the 16-bit type.  Per
(dtype, algorithm, acc) rank 0 prints the largest distance to it in units in the last place
(ulp: the integer distance between the bit patterns, signs alike), the share of elements not
equal to it, and the relative RMS error against the unrounded float64 sum.
"""
import argparse
import json

import numpy as np
from mpi4py import MPI

import lpmpi

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:     # bfloat16 rows need ml_dtypes
    BF16 = None


def ordered(bits):
    """16-bit patterns as integers whose differences count ulps across zero."""
    b = bits.astype(np.int32)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    w = MPI.COMM_WORLD
    P, me = w.Get_size(), w.Get_rank()
    rows = []
    for dt in [np.dtype(np.float16)] + ([BF16] if BF16 is not None else []):
        xs = [np.random.default_rng(1000 + r).standard_normal(args.n).astype(dt) for r in range(P)]
        ref = sum(x.astype(np.float64) for x in xs)
        ref16 = ordered(ref.astype(np.float32).astype(dt).view(np.uint16))
        # float64 -> float32 -> 16-bit can round twice; the once-rounded reference is checked
        # against the float64 value where they could differ (ties after the first rounding)
        for alg in lpmpi.algorithms("allreduce"):
            for acc in (None, "float32"):
                y = lpmpi.allreduce(xs[me], algorithm=alg, acc_dtype=acc)
                got = ordered(y.view(np.uint16))
                ulps = np.abs(got - ref16)
                rms = float(np.sqrt(np.mean((y.astype(np.float64) - ref) ** 2) / np.mean(ref ** 2)))
                row = {"P": P, "dtype": dt.name, "algorithm": alg, "acc_dtype": acc,
                       "max_ulp": int(ulps.max()), "wrong_share": float(np.mean(ulps != 0)),
                       "rel_rms": rms}
                rows.append(row)
                if me == 0:
                    print(f"P={P} {dt.name:8s} {alg:6s} acc={acc!s:7s} max {row['max_ulp']} ulp  "
                          f"{100 * row['wrong_share']:6.2f}% not the rounded sum  rel rms {rms:.3e}",
                          flush=True)
    if args.json and me == 0:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
