"""Summarize issue 40's launches (docs/results/issue40/run.sh): per size, the median and range
over launches of the calls to settle, the exploration cost, the settled time over the grid's
best, the static choice over the grid's best and MPI's own over the tuned call; the busy runs;
the settled overhead at 8 and 64 B.

    python docs/results/issue40/summarize.py DIR > DIR/summary.txt
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def online(d: Path, prefix: str) -> None:
    runs = [json.loads(p.read_text()) for p in sorted(d.glob(f"{prefix}_*.json"))]
    runs = [r for r in runs if "online" in r]
    if not runs:
        return
    print(f"\n## {prefix}: {len(runs)} launches (odd: unpinned, even: -bind-to core)")
    print(f"{'size':>10} {'settle calls':>18} {'explore cost':>20} {'excess':>20} {'tuned/best':>20} "
          f"{'static/best':>20} {'native/tuned':>20}  choices")
    sizes = sorted({row["nbytes"] for r in runs for row in r["online"]})
    for n in sizes:
        rows = [row for r in runs for row in r["online"] if row["nbytes"] == n]
        g = [row["grid"] for row in rows]
        choices = ", ".join(sorted({_choice(row["key"]) for row in rows}))
        print(f"{n:>10} {spread([row['key']['settle_calls'] if row['key'] else None for row in rows]):>18} "
              f"{spread([row['explore_cost'] for row in rows]):>20} {spread([row['explore_excess'] for row in rows]):>20} "
              f"{spread([row['settled_ratio'] for row in rows]):>20} "
              f"{spread([x['static_us'] / x['best_us'] for x in g]):>20} "
              f"{spread([row['vs_native'] for row in rows]):>20}  {choices}")
        for row in rows:
            if "loaded_ratio" in row:
                k = row.get("key_after") or {}
                print(f"{'':>10} busy: tuned/best under load {row['loaded_ratio']:.2f} "
                      f"(loop tail {row['loaded_tail_ratio']:.2f}), after it left (loop tail over the quiet best) "
                      f"{row['after_ratio']:.2f}; drifts {k.get('drifts_slower')} slower / {k.get('drifts_faster')} "
                      f"faster; static/best under load {row['grid_loaded']['static_us'] / row['grid_loaded']['best_us']:.2f}; "
                      f"native/tuned under load {row['grid_loaded']['native_us'] / row['grid_loaded']['tuned_us']:.2f}")


def _choice(k):
    if not k or k["choice"] is None:
        return "-"
    c = k["candidates"][k["choice"]]
    return c["algorithm"] + (f"/{c['chunk_bytes']}" if c["chunk_bytes"] else "") + (f"@{c['transport']}" if c["transport"] else "")


def overhead(d: Path) -> None:
    print("\n## settled overhead: auto under LPMPI_AUTOTUNE=1 against explicit algorithms in the same run "
          "(interleaved), and auto with the tuner off in the next launch")
    for on in ("overhead", "overhead_off"):
        for p in sorted(d.glob(f"{on}_[0-9]*.json")):
            rows = json.loads(p.read_text())["rows"]
            by = {(r["nbytes"], r["label"]): r["time_us"] for r in rows}
            parts = []
            for n in sorted({r["nbytes"] for r in rows}):
                a, m, nat = by.get((n, "auto")), by.get((n, "mst")), by.get((n, "native"))
                parts.append(f"{n} B: auto {a:.2f} us, mst {m:.2f}, native {nat:.2f} (auto/mst {a / m:.3f})")
            print(f"  {p.stem:>16}: " + "; ".join(parts))


def main() -> None:
    d = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    cpu = (d / "cpu.txt").read_text().strip() if (d / "cpu.txt").exists() else "?"
    print(f"# issue 40 measurements, {cpu}, P = 2, MPICH 5.0.2 wheel")
    for prefix in ("model", "table", "busy"):
        online(d, prefix)
    overhead(d)


if __name__ == "__main__":
    main()
