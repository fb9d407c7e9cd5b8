"""Tables and the figure of docs/compression.md from run_box.sh's JSON lines.

    python docs/results/issue49/summarize.py DIR [--png docs/figures/compression_rate.png]

Per layout and size: over the launches, the median (min-max) of the speed-up against
uncompressed auto (auto's median time / the compressed median time, each launch its own
ratio) and the bytes the NICs sent as a fraction of uncompressed; per link rate, the median
time of each mode (the figure: time against link rate, with where the codecs set the time).
"""
import argparse
import glob
import json
import os
import statistics as st

MODES = ("bf16", "int8", "int4")
TARGET = {"bf16": (1.8, 0.52), "int8": (3.2, 0.27), "int4": (5.0, 0.14)}


def load(pattern):
    out = []
    for p in sorted(glob.glob(pattern)):
        try:
            with open(p) as f:
                out.append(json.load(f))
        except (OSError, ValueError):
            pass
    return out


def spread(v):
    return f"{st.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"


def layouts(d):
    lines = ["| layout (nodes x ranks) | size | launches | " + " | ".join(
        f"{m} speed-up / NIC bytes" for m in MODES) + " |", "|---|---|---|" + "---|" * len(MODES)]
    data = {}
    for name in ("1x1", "2x2", "1x1x1x1"):
        runs = load(os.path.join(d, f"layout_{name}_*.json"))
        if not runs:
            continue
        label = {"1x1": "2 x 1", "2x2": "2 x 2", "1x1x1x1": "4 x 1"}[name]
        for mib in runs[0]["results"]:
            cells, row = [], {}
            for m in MODES:
                ups = [r["results"][mib]["None"]["median_s"] / r["results"][mib][m]["median_s"] for r in runs]
                nic = [r["results"][mib][m]["nic_bytes"] / max(r["results"][mib]["None"]["nic_bytes"], 1) for r in runs]
                t, b = TARGET[m]
                ok = "" if min(ups) >= t and max(nic) <= b else " *"
                cells.append(f"{spread(ups)}x / {st.median(nic):.3f}{ok}")
                row[m] = {"speedup": ups, "nic": nic}
            base = [r["results"][mib]["None"]["median_s"] for r in runs]
            row["auto_s"] = base
            data[f"{label} {mib} MiB"] = row
            lines.append(f"| {label} | {mib} MiB | {len(runs)} | " + " | ".join(cells) + " |")
    return lines, data


def rates(d, png):
    order = ["1gbit", "2500mbit", "5gbit", "10gbit", "none"]
    # "none": the NICs unshaped (veth pairs: their speed is the CPU's), drawn at 40
    gbit = {"1gbit": 1, "2500mbit": 2.5, "5gbit": 5, "10gbit": 10, "none": 40}
    have = {r: load(os.path.join(d, f"rate_{r}_*.json")) for r in order}
    have = {r: v for r, v in have.items() if v}
    if not have:
        return [], {}
    mib = next(iter(have.values()))[0]["sizes_mib"][0]
    keys = ["None", *MODES]
    med = {r: {k: st.median([x["results"][str(mib)][k]["median_s"] for x in v]) for k in keys}
           for r, v in have.items()}
    lines = ["| link rate | auto (uncompressed) | " + " | ".join(MODES) + " |",
             "|---|---|" + "---|" * len(MODES)]
    for r in have:
        rate = "unshaped" if r == "none" else f"{gbit[r]:g} Gbit/s"
        lines.append(f"| {rate} | {med[r]['None'] * 1e3:.1f} ms | " + " | ".join(
            f"{med[r][m] * 1e3:.1f} ms ({med[r]['None'] / med[r][m]:.2f}x)" for m in MODES) + " |")
    if png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        xs = [gbit[r] for r in have]
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for k, style in zip(keys, ("o-", "s-", "^-", "v-")):
            ax.plot(xs, [med[r][k] * 1e3 for r in have], style, label="uncompressed (auto)" if k == "None" else k)
        # the link bound of the uncompressed message (2 (N - 1) / N n per NIC, N = 2)
        shaped = [x for r, x in zip(have, xs) if r != "none"]
        ax.plot(shaped, [mib * 2 ** 20 * 8 / (x * 1e9) * 1e3 for x in shaped], "k:", label="link bound, uncompressed")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels(["unshaped" if r == "none" else f"{gbit[r]:g}" for r in have])
        ax.set_xlabel("link rate (Gbit/s per NIC)")
        ax.set_ylabel(f"allreduce time (ms), {mib} MiB float32")
        ax.set_title("2 nodes x 1 rank, cluster in a box: where the codecs, not the link, set the time",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(png, dpi=110)
    return lines, med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--png")
    a = ap.parse_args()
    lines, data = layouts(a.dir)
    print("\n".join(lines))
    print()
    rl, med = rates(a.dir, a.png)
    print("\n".join(rl))
    with open(os.path.join(a.dir, "summary.json"), "w") as f:
        json.dump({"layouts": data, "rates": med}, f, indent=1)


if __name__ == "__main__":
    main()
