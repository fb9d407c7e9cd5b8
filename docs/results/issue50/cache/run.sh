#!/usr/bin/env bash
# Issue 50: the per-machine cache of learned rows.  N pairs of fresh launches (odd pairs pinned,
# -bind-to core): the tuner off (the static choice: the baseline of the first calls' cost), run 1
# from an empty cache (it explores and writes the cache at exit), run 2 from the cache run 1
# wrote (its keys start settled).  MPICH (the venv's), P = 2, no table
# (LPMPI_TUNING_FILE=none: the cost model's start, the tuner's hardest case).
#   bash docs/results/issue50/cache/run.sh OUTDIR [N]
set -u
OUT=$(mkdir -p "${1:?outdir}" && cd "$1" && pwd); N=${2:-4}
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
mkdir -p "$OUT"
lscpu | grep "Model name" > "$OUT/cpu.txt"
cd /tmp || exit 1
for i in $(seq 1 "$N"); do
    PIN=""; [ $((i % 2)) = 1 ] && PIN="-bind-to core"
    C=$(mktemp -d)
    for run in off 1 2; do     # off: the tuner off (the static choice's own first calls, the baseline)
        AT=1; [ $run = off ] && AT=0
        XDG_CACHE_HOME=$C LPMPI_AUTOTUNE=$AT LPMPI_TUNING_FILE=none timeout 600 "$ROOT/.venv/bin/mpiexec" -n 2 $PIN \
            "$ROOT/.venv/bin/python" "$ROOT/docs/results/issue50/cache/loop.py" --json "$OUT/pair${i}_run$run.json" \
            > "$OUT/pair${i}_run$run.txt" 2>&1
        echo "$(date +%T) pair $i run $run ${PIN:-unpinned}"; cat "$OUT/pair${i}_run$run.txt"
    done
    rm -rf "$C"
done
