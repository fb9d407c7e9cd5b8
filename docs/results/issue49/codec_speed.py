"""The codecs' speed on one core (issue 49: encode + decode of int8 at least half of memcpy's
speed): float32 data of 64 MiB (out of cache), encode and decode per compression against
numpy's copy of the same bytes (memcpy), medians of --reps timed runs, interleaved (copy,
encode, decode, copy, ...), in a fresh process per instruction set (LPMPI_CODEC_ISA).  The copy
and the decode write separate arrays of their own, so that neither finds lines the other left
in the caches (the VM reports a 300 MiB L3).

    python docs/results/issue49/codec_speed.py [--mib 64] [--reps 9] [--json PATH]

Speeds are GB/s of float32 data (4 bytes an element) either way; "of memcpy" is the ratio to
the copy's GB/s of the same bytes (read + write of 4 bytes an element: memcpy's own bytes).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ISAS = ("scalar", "avx2", "avx512")


def child(mib: int, reps: int) -> dict:
    from lpmpi import _core
    n = (mib << 20) // 4
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    dst = np.empty_like(x)          # the copy's destination
    dec = np.empty_like(x)          # the decode's own (neither finds the other's lines cached)
    out = {"isa": _core._cz_isa(), "mib": mib}
    wires = {c: np.empty(_core._cz_bytes(c, n), np.uint8) for c in ("bf16", "int8", "int4")}
    t = {k: [] for k in ["copy"] + [f"{c} {w}" for c in wires for w in ("encode", "decode")]}
    for rep in range(reps + 1):
        for c, w in wires.items():
            t0 = time.perf_counter()
            np.copyto(dst, x)
            t1 = time.perf_counter()
            _core._cz_encode(c, x, out=w)
            t2 = time.perf_counter()
            _core._cz_decode(c, w, dec)
            t3 = time.perf_counter()
            if rep:                                  # (the first round warms up)
                t["copy"].append(t1 - t0)
                t[f"{c} encode"].append(t2 - t1)
                t[f"{c} decode"].append(t3 - t2)
    gbs = {k: 4 * n / float(np.median(v)) / 1e9 for k, v in t.items()}
    out["GBps"] = gbs
    out["of_memcpy"] = {k: v / gbs["copy"] for k, v in gbs.items() if k != "copy"}
    spread = {k: (float(np.min(v)), float(np.max(v))) for k, v in t.items()}
    out["spread_s"] = spread
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--pin", type=int, default=None, help="taskset -c N for the children")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.mib, a.reps)))
        return
    rows = []
    for isa in ISAS:
        cmd = [sys.executable, __file__, "--child", "--mib", str(a.mib), "--reps", str(a.reps)]
        if a.pin is not None:
            cmd = ["taskset", "-c", str(a.pin), *cmd]
        r = subprocess.run(cmd, env={**os.environ, "LPMPI_CODEC_ISA": isa}, capture_output=True,
                           text=True, timeout=600, check=True)
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        g, m = rows[-1]["GBps"], rows[-1]["of_memcpy"]
        print(f"{rows[-1]['isa']:>7}: memcpy {g['copy']:.1f} GB/s; "
              + "; ".join(f"{k} {g[k]:.1f} ({m[k]:.2f})" for k in m), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
