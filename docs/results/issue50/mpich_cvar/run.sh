#!/usr/bin/env bash
# Issue 50 under MPICH with its allreduce algorithm forced (MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM:
# recursive_doubling, ring; the shipped table, measured without it, does not apply): lpmpi-bench
# --online, 128 calls a size under LPMPI_AUTOTUNE=1, then the grid, MPI's own and the settled
# call side by side.   bash docs/results/issue50/mpich_cvar/run.sh OUTDIR [LAUNCHES]
set -u
OUT=$(mkdir -p "${1:?outdir}" && cd "$1" && pwd); N=${2:-2}
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
SIZES=${SIZES:-8,4K,64K,256K,1M,16M}
lscpu | grep "Model name" > "$OUT/cpu.txt"
cd /tmp || exit 1
for i in $(seq 1 "$N"); do
    PIN=""; [ $((i % 2)) = 0 ] && PIN="-bind-to core"
    for alg in recursive_doubling ring; do
        MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=$alg LPMPI_AUTOTUNE_FILE=none timeout 1200 \
            "$ROOT/.venv/bin/mpiexec" -n 2 $PIN "$ROOT/.venv/bin/python" -m lpmpi.bench --online \
            --sizes "$SIZES" --calls 128 --json "$OUT/mpich_${alg}_$i.json" > "$OUT/mpich_${alg}_$i.txt" 2>&1
        echo "$(date +%T) mpich_${alg}_$i: $(grep '^# worst' "$OUT/mpich_${alg}_$i.txt")"
    done
done
