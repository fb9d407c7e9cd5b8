"""Each MPI library's allreduce (or allgather, reduce_scatter) in every configuration a user can
pick, against lpmpi's auto.

    python tools/native_sweep.py --library mpich --python .venv/bin/python --mpiexec .venv/bin/mpiexec \\
        [--collective allreduce|allgather|reduce_scatter] [--env K=V ...] \\
        [--sizes 4K,64K,1MiB,16MiB,64MiB] [--rounds 2] --out sweep.json

allgather: MPICH MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM, Open MPI coll_tuned_allgather_algorithm
1..8, Intel MPI I_MPI_ADJUST_ALLGATHER=1..5; reduce_scatter (MPI_Reduce_scatter_block): MPICH
MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM, Open MPI coll_tuned_reduce_scatter_block_algorithm
1..4, Intel MPI I_MPI_ADJUST_REDUCE_SCATTER_BLOCK=1..5 (sizes: the P blocks' bytes).

For every configuration of the library's allreduce (MPICH: MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM;
Open MPI: coll_tuned_allreduce_algorithm with dynamic rules, and segment sizes for the
segmented ring; Intel MPI: I_MPI_ADJUST_ALLREDUCE=1..N) it runs
``mpiexec -n 2 python -m lpmpi.bench --algorithms auto,mpi4py`` with that configuration in the
environment and keeps both rows: the library's own ``comm.Allreduce`` (mpi4py) in that
configuration, and lpmpi's ``auto`` in the same run (lpmpi does not use the library's
collectives except in its ``native`` algorithm, so auto's time is a per-run reference of the
machine's state).  Rounds repeat the whole sweep (configurations in turn, so drift hits them
alike).  The summary per size: the library's default, its best configuration (the smallest
median over rounds), lpmpi auto (median over all runs), and the ratios with their spread.
A configuration the library rejects (the run fails) is reported and skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ODYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"
#: the other collectives' configurations: (library, collective) -> every setting a user can pick
CONFIGS_OF = {
    ("mpich", "allgather"): [{}] + [{"MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM": a} for a in (
        "brucks", "k_brucks", "recursive_doubling", "ring", "recexch_doubling", "recexch_halving")],
    ("ompi", "allgather"): [{}] + [{ODYN: "1", "OMPI_MCA_coll_tuned_allgather_algorithm": str(a)}
                                   for a in range(1, 9)],
    ("impi", "allgather"): [{}] + [{"I_MPI_ADJUST_ALLGATHER": str(a)} for a in range(1, 6)],
    ("mpich", "reduce_scatter"): [{}] + [{"MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM": a} for a in (
        "noncommutative", "recursive_doubling", "pairwise", "recursive_halving")],
    ("ompi", "reduce_scatter"): [{}] + [{ODYN: "1", "OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm": str(a)}
                                        for a in range(1, 5)],
    ("impi", "reduce_scatter"): [{}] + [{"I_MPI_ADJUST_REDUCE_SCATTER_BLOCK": str(a)} for a in range(1, 6)],
}

CONFIGS = {
    "mpich": [{}] + [{"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": a} for a in (
        "recursive_doubling", "reduce_scatter_allgather", "ring", "k_reduce_scatter_allgather",
        "tree", "recexch")],
    "ompi": [{}] + [{"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                     "OMPI_MCA_coll_tuned_allreduce_algorithm": str(a)} for a in (1, 2, 3, 4, 6, 7)]
    + [{"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "5",
        "OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize": str(s)} for s in (65536, 262144, 1048576)],
    "impi": [{}] + [{"I_MPI_ADJUST_ALLREDUCE": str(a)} for a in range(1, 25)],
}


SHORT = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "algorithm", "OMPI_MCA_coll_tuned_use_dynamic_rules": None,
         "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM": "algorithm", "OMPI_MCA_coll_tuned_allgather_algorithm": "algorithm",
         "MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM": "algorithm",
         "OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm": "algorithm",
         "I_MPI_ADJUST_ALLGATHER": "I_MPI_ADJUST_ALLGATHER",
         "I_MPI_ADJUST_REDUCE_SCATTER_BLOCK": "I_MPI_ADJUST_REDUCE_SCATTER_BLOCK",
         "OMPI_MCA_coll_tuned_allreduce_algorithm": "algorithm",
         "OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize": "segsize",
         "I_MPI_ADJUST_ALLREDUCE": "I_MPI_ADJUST_ALLREDUCE"}


def label(cfg: dict[str, str]) -> str:
    """A configuration's short name: ``algorithm=5,segsize=65536``; ``default`` for none."""
    return ",".join(f"{SHORT.get(k, k)}={v}" for k, v in cfg.items() if SHORT.get(k, k)) or "default"


def run_one(a, cfg, js):
    env = dict(os.environ, **dict(kv.split("=", 1) for kv in a.env), **cfg)
    cmd = [a.mpiexec, "-n", "2", *a.mpiexec_args, a.python, "-m", "lpmpi.bench", "--collective",
           a.collective, "--algorithms", "auto,mpi4py", "--sizes", a.sizes, "--min-time", str(a.min_time), "--no-bandwidth",
           "--json", js]
    try:
        p = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if p.returncode != 0 or not os.path.exists(js):
        return None, (p.stdout + p.stderr)[-400:].strip().replace("\n", " | ")
    with open(js) as f:
        doc = json.load(f)
    rows = {}
    for r in doc["rows"]:
        if r["time_us"] is not None and r["check"] in ("ok", "n/a", "-"):
            rows.setdefault(r["nbytes"], {})[r["label"]] = r["time_us"]
    return {"rows": rows, "library": doc["header"]["mpi_library"]}, None


def summarize(runs, library, rounds, collective="allreduce"):
    """Per size: the library's default and auto in the default's runs, the best configuration
    (smallest median over rounds), and each one's time over auto's in the same run."""
    def t(r, n, label):
        rows = r["rows"]
        return rows.get(str(n), rows.get(n, {})).get(label)

    sizes = sorted({int(n) for r in runs for n in r["rows"]})
    summary = []
    print(f"\n# {library}: {collective}, P = 2, float32 sum; times: medians over {rounds} round(s) (us); ratios: "
          "the library's time over auto's in the same run, median [min max] over the runs")
    print(f"{'size':>10} {'default':>10} {'auto':>10} {'default/auto':>20} {'best config':>28} "
          f"{'best':>10} {'best/auto':>20}")
    for n in sizes:
        per = {}
        for r in runs:
            if t(r, n, "mpi4py"):
                per.setdefault(r["config"], []).append(t(r, n, "mpi4py"))
        autos = [t(r, n, "auto") for r in runs if t(r, n, "auto")]
        if not per or not autos:
            continue
        med = {k: statistics.median(v) for k, v in per.items()}
        best = min(med, key=med.get)

        def same_run(config, n=n):   # the library's time / auto's, in each run of `config`
            return [t(r, n, "mpi4py") / t(r, n, "auto") for r in runs
                    if r["config"] == config and t(r, n, "mpi4py") and t(r, n, "auto")]

        # auto in the default configuration's runs (where auto picks native, the library's
        # configuration changes auto too: compare within a run)
        auto = statistics.median([t(r, n, "auto") for r in runs if r["config"] == "default" and t(r, n, "auto")]
                                 or autos)
        dflt, rd, rb = med.get("default"), same_run("default"), same_run(best)
        summary.append({"nbytes": n, "default_us": dflt, "best_config": best, "best_us": med[best],
                        "auto_us": auto, "default_over_auto_runs": rd, "best_over_auto_runs": rb,
                        "configs_us": med})

        def cell(v):
            return f"{statistics.median(v):.2f} [{min(v):.2f} {max(v):.2f}]" if v else "-"
        print(f"{n:>10} {dflt or float('nan'):>10.1f} {auto:>10.1f} {cell(rd):>20} {best:>28} "
              f"{med[best]:>10.1f} {cell(rb):>20}")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--collective", default="allreduce", choices=("allreduce", "allgather", "reduce_scatter"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--mpiexec-args", default="", help="extra mpiexec arguments, space separated")
    ap.add_argument("--env", action="append", default=[], metavar="K=V")
    ap.add_argument("--sizes", default="4K,64K,1MiB,16MiB,64MiB")
    ap.add_argument("--min-time", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--configs", help="only these configuration indices, comma separated")
    ap.add_argument("--out", help="JSON of every run and the summary")
    ap.add_argument("--summarize", metavar="JSON", help="print the summary of an earlier --out file")
    a = ap.parse_args()
    if a.summarize:
        with open(a.summarize) as f:
            doc = json.load(f)
        summarize(doc["runs"], doc["library"], max(r["round"] for r in doc["runs"]) + 1,
                  doc.get("collective", "allreduce"))
        return
    if not a.out:
        ap.error("--out is required")
    a.mpiexec_args = a.mpiexec_args.split()
    configs = CONFIGS[a.library] if a.collective == "allreduce" else CONFIGS_OF[(a.library, a.collective)]
    if a.configs:
        configs = [configs[int(i)] for i in a.configs.split(",")]
    runs, failed, library = [], {}, None
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            for i, cfg in enumerate(configs):
                res, err = run_one(a, cfg, os.path.join(tmp, f"{rnd}-{i}.json"))
                name = label(cfg)
                if res is None:
                    failed[name] = err
                    print(f"# round {rnd + 1} {name}: FAILED ({err[:160]})", flush=True)
                    continue
                library = library or res["library"]
                runs.append({"round": rnd, "config": name, "env": cfg, "rows": res["rows"]})
                print(f"# round {rnd + 1} {name}: " + ", ".join(
                    f"{n}: mpi {v.get('mpi4py', float('nan')):.1f} auto {v.get('auto', float('nan')):.1f}"
                    for n, v in sorted(res["rows"].items(), key=lambda kv: int(kv[0]))), flush=True)
    summary = summarize(runs, library, a.rounds, a.collective)
    with open(a.out, "w") as f:
        json.dump({"library": library, "collective": a.collective, "sizes": [s["nbytes"] for s in summary], "runs": runs, "failed": failed,
                   "summary": summary, "command": " ".join(sys.argv)}, f, indent=1)
    if failed:
        print(f"# configurations that failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
