"""The figures of docs/paper.md, drawn from the JSON that the runs write (one command per figure).

    python tools/plots.py time-vs-p     # docs/figures/time_vs_p.png
    python tools/plots.py busbw         # docs/figures/busbw.png
    python tools/plots.py sgd-loss      # docs/figures/sgd_loss.png
    python tools/plots.py sgd-split     # docs/figures/sgd_split.png
    python tools/plots.py box-nodes     # docs/figures/box_nodes.png
    python tools/plots.py all

Inputs: docs/results/*.json (measured on this machine: python -m lpmpi.bench, examples/bsp_sgd.py)
and sim/results/*.json (simulated: python sim/run.py).  Every panel says whether it shows
MEASURED, SIMULATED or MODELLED numbers.  Needs matplotlib (pip install '.[examples]').
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RES = DOCS / "results"
SIMRES = ROOT / "sim" / "results"
FIG = DOCS / "figures"
MIB = 1 << 20
STYLE = {
    "lp": ("tab:red", "o"), "mst": ("tab:blue", "s"), "be": ("tab:green", "^"), "ring": ("tab:purple", "v"),
    "native": ("tab:gray", "x"), "auto": ("tab:orange", "+"), "mpi4py": ("black", "."),
    "smpi-mpich": ("tab:brown", "D"), "smpi-ompi": ("tab:olive", "P"),
}


def _load(path: Path):
    if not path.exists():
        print(f"missing {path.relative_to(ROOT)} (see docs/paper.md for the command that writes it)")
        return None
    return json.loads(path.read_text())


def _style(label: str) -> dict:
    """An algorithm's colour and marker; variants (a forced chunk "lp/64K", a window "lp/32K/w1")
    dashed, one chunk in flight dash-dotted, hollow markers."""
    color, marker = STYLE.get(label.split("/")[0], ("tab:cyan", "*"))
    if "/" not in label:
        return {"color": color, "marker": marker, "linestyle": "-"}
    return {"color": color, "marker": marker, "linestyle": "-." if "/w" in label else "--",
            "markerfacecolor": "none"}


def _save(fig, name: str) -> None:
    FIG.mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(FIG / name, dpi=110)
    plt.close(fig)
    print(f"wrote docs/figures/{name}")


def _sim_panel(ax, doc, nbytes: int, title: str, coll: str = "allreduce") -> None:
    rows = [r for r in doc["rows"] if r["kind"] == "simulated" and r["coll"] == coll and r["nbytes"] == nbytes]
    for label in sorted({r["label"] for r in rows}, key=lambda s: (s.startswith("smpi"), s)):
        pts = sorted((r["P"], r["time_s"] * 1e3) for r in rows if r["label"] == label)
        ax.plot(*zip(*pts), label=label, **_style(label))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("P (processes)")
    ax.set_ylabel("time (ms)")
    ax.grid(alpha=0.3)


def _model_lines(ax, Ps, nbytes, alpha, beta, algs=("lp", "mst", "be")) -> None:
    """The alpha-beta-gamma model of src/alg/registry.c (gamma = 0), dotted: MODELLED."""
    try:
        from lpmpi import _core
    except ImportError:
        return
    old = _core.model_get()
    _core.model_set(alpha, beta, 0.0)
    try:
        for a in algs:
            ts = [_core.predict("allreduce", a, P, float(nbytes)) * 1e3 for P in Ps]
            ax.plot(Ps, ts, linestyle=":", color=_style(a)["color"], label=f"{a} (model)")
    finally:
        _core.model_set(*old)


def time_vs_p() -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    # measured here: --scaling
    doc = _load(RES / "scaling_here.json")
    ax = axes[0]
    if doc:
        rows = [r for r in doc["rows"] if r["collective"] == "allreduce" and r["time_us"]]
        nb = max(r["nbytes"] for r in rows)
        for label in dict.fromkeys(r["label"] for r in rows):
            if label == "mpi4py":
                continue
            pts = sorted((r["nprocs"], r["time_us"] / 1e3) for r in rows if r["label"] == label and r["nbytes"] == nb)
            ax.plot(*zip(*pts), label=label, **_style(label))
        ax.set_title(f"MEASURED here: allreduce {nb // MIB} MiB float32\n(2 cores, P > 2 oversubscribed)", fontsize=9)
        ax.set_xlabel("P (processes)")
        ax.set_ylabel("time (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    doc = _load(SIMRES / "pcie8.json")
    if doc:
        _sim_panel(axes[1], doc, 64 * MIB, "SIMULATED (SMPI): 8 GPUs behind PCIe switches, 10 GB/s\n"
                   "allreduce 64 MiB")
        axes[1].legend(fontsize=7)
    doc = _load(SIMRES / "fattree.json")
    if doc:
        ax = axes[2]
        _sim_panel(ax, doc, 64 * MIB, "SIMULATED (SMPI): fat-tree, 100 Gb/s, allreduce 64 MiB\n"
                   "dotted: MODELLED (alpha-beta, src/alg/registry.c)")
        Ps = sorted({r["P"] for r in doc["rows"]})
        _model_lines(ax, Ps, 64 * MIB, 1e-6, 1 / 12.5e9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.legend(fontsize=6, ncol=2)
    _save(fig, "time_vs_p.png")


def busbw() -> None:
    colls = ("allreduce", "reduce", "bcast")
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    doc = _load(RES / "bench_here_p4.json")
    if doc:
        P = doc["header"]["nprocs"]
        for ax, coll in zip(axes[0], colls):
            rows = [r for r in doc["rows"] if r["collective"] == coll and r["busbw_GBps"]]
            for label in dict.fromkeys(r["label"] for r in rows):
                pts = sorted((r["nbytes"], r["busbw_GBps"]) for r in rows if r["label"] == label)
                ax.plot(*zip(*pts), label=label, **_style(label))
            ax.set_title(f"MEASURED here: {coll}, P={P} (2 cores)", fontsize=9)
    doc = _load(SIMRES / "pcie8.json")
    if doc:
        for ax, coll in zip(axes[1], colls):
            rows = [r for r in doc["rows"] if r["coll"] == coll and r["P"] == 8 and r["kind"] == "simulated"]
            for label in sorted({r["label"] for r in rows}):
                pts = sorted((r["nbytes"], r["busbw_GBps"]) for r in rows if r["label"] == label)
                ax.plot(*zip(*pts), label=label, **_style(label))
            ax.set_title(f"SIMULATED (SMPI): {coll}, P=8 GPUs, PCIe tree 10 GB/s", fontsize=9)
    for ax in axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    _save(fig, "busbw.png")


def sgd_loss() -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for P in (1, 2, 3, 4):
        recs = _load(RES / f"sgd_loss_p{P}.json")
        if not recs:
            continue
        its = [x for r in recs for x in r["iteration_losses"]]
        axes[0].plot(range(1, len(its) + 1), its, label=f"P={P}", linewidth=2.5 - 0.5 * P, alpha=0.8)
        axes[1].plot([r["epoch"] for r in recs], [r["accuracy"] for r in recs], marker="o", label=f"P={P}")
    axes[0].set_xlabel("iteration (global batch)")
    axes[0].set_ylabel("training loss (global batch)")
    axes[0].set_yscale("log")
    axes[0].set_title("MEASURED: BSP-SGD on digits, lpmpi lp allreduce(avg)\nsame seed and global batch: curves coincide",
                      fontsize=9)
    axes[1].set_xlabel("epoch")
    axes[1].set_ylabel("held-out accuracy")
    axes[1].set_title("MEASURED: held-out accuracy per epoch", fontsize=9)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    _save(fig, "sgd_loss.png")


def sgd_split() -> None:
    recs = _load(RES / "sgd_split_p2.json")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if recs:
        algs = [r["algorithm"] for r in recs]
        comp = [r["compute_s"] / r["iterations"] * 1e3 for r in recs]
        comm = [r["comm_s"] / r["iterations"] * 1e3 for r in recs]
        ax.bar(algs, comp, label="compute (forward + backward + update)", color="tab:blue")
        ax.bar(algs, comm, bottom=comp, label="communication (lpmpi allreduce avg)", color="tab:red")
        for i, (c, m) in enumerate(zip(comp, comm)):
            ax.text(i, c + m, f"{100 * m / (c + m):.0f}%", ha="center", va="bottom", fontsize=8)
        r0 = recs[0]
        ax.set_title(f"MEASURED: BSP-SGD time per iteration, P={r0['P']}, "
                     f"{r0['grad_bytes'] / MIB:.1f} MiB fused gradient (width {r0['width']})\n"
                     "label: communication share (includes the initial bcast)", fontsize=9)
        ax.set_ylabel("ms per iteration (slowest rank)")
        ax.legend(fontsize=8)
    _save(fig, "sgd_split.png")


def box_nodes() -> None:
    """The cluster in a box against its simulation and the projection (docs/paper.md, "Across
    nodes"): MEASURED box medians (big markers, N <= 4), SIMULATED lines (sim/results/box.json),
    MODELLED N = 1024 (hollow markers, sim/compare_box.py's formulas), the link bound dotted."""
    doc = _load(SIMRES / "box.json")
    if not doc:
        return
    sys.path.insert(0, str(ROOT / "sim"))
    import compare_box as cb

    box = cb.box_medians("boxbench3_epyc.txt", "boxbench64_epyc.txt")
    sim = cb.sim_rows("box")
    n = 16 * MIB
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    panels = [("allreduce", ["lp", "lp/w1", "lp/16K/w1", "ring", "be", "mst", "smpi-mpich"], ["lp", "ring", "be", "native"],
               lambda N: 2 * n * (N - 1) / N / 125e6),
              ("bcast", ["lp", "lp/w1", "lp/16K/w1", "mst"], ["lp", "mst", "native"], lambda N: n / 125e6)]
    for ax, (coll, labels, measured, bound) in zip(axes, panels):
        Ns = sorted({int(r["P"]) for r in doc["rows"] if r["coll"] == coll and r.get("layout") == ",".join(["1"] * r["P"])})
        for lab in labels:
            pts = [(N, sim[(",".join(["1"] * N), coll, n, lab)]) for N in Ns if (",".join(["1"] * N), coll, n, lab) in sim]
            if pts:
                st = _style(lab)
                if lab == "lp/16K/w1":   # told apart from lp/w1 (the model's chunk, W = 1)
                    st.update(color="darkred", linestyle=(0, (5, 1, 1, 1, 1, 1)))
                ax.plot(*zip(*pts), label=f"{lab} (sim)", **st)
        for alg in measured:
            pts = [(N, box[(",".join(["1"] * N), coll, n, alg)]) for N in (2, 3, 4) if (",".join(["1"] * N), coll, n, alg) in box]
            if pts:
                st = _style("native" if alg == "native" else alg)
                ax.plot(*zip(*pts), linestyle="none", marker=st["marker"], markersize=11, color=st["color"],
                        markeredgecolor="black", label=f"{alg} (box)")
        for alg in (["lp", "ring", "be", "mst"] if coll == "allreduce" else ["lp", "mst"]):
            ax.plot([1024], [cb.model(coll, alg, 1024, n) * 1e3], linestyle="none", marker=_style(alg)["marker"],
                    markersize=9, markerfacecolor="none", color=_style(alg)["color"])
        xs = sorted(set(Ns) | {1024})
        ax.plot(xs, [bound(N) * 1e3 for N in xs], linestyle=":", color="black", label="link bound")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N (nodes, 1 rank each)")
        ax.set_ylabel("time (ms)")
        ax.set_title(f"{coll} 16 MiB, 1 Gbit/s NICs, 6 us: MEASURED box (big markers, N <= 4),\n"
                     "SIMULATED (lines, N <= 256), MODELLED N = 1024 (hollow; lp: best chunk, W = 1)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    _save(fig, "box_nodes.png")


FIGS = {"time-vs-p": time_vs_p, "busbw": busbw, "sgd-loss": sgd_loss, "sgd-split": sgd_split, "box-nodes": box_nodes}


def main(argv: list[str] | None = None) -> int:
    """Draw the figures named on the command line (default: all); 1 without matplotlib."""
    ap = argparse.ArgumentParser(prog="python tools/plots.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("figures", nargs="*", choices=[*FIGS, "all"], default=["all"], metavar="FIGURE",
                    help=f"figures to draw: {', '.join(FIGS)} or all (default: all)")
    args = ap.parse_args(argv)
    if plt is None:
        print("tools/plots.py needs matplotlib: install it with pip install matplotlib "
              "(or pip install '.[examples]').", file=sys.stderr)
        return 1
    for w in args.figures:
        for f in FIGS.values() if w == "all" else [FIGS[w]]:
            f()
    return 0


if __name__ == "__main__":
    sys.exit(main())
