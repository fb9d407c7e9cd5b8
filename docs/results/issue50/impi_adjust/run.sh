#!/usr/bin/env bash
# Issue 50 under Intel MPI 2021.18 (impi-rt in $IMPI, under the MPICH-built mpi4py and lpmpi) with
# I_MPI_ADJUST_ALLREDUCE=1..N (each of Intel's allreduce algorithms forced; the shipped Intel
# table, measured without it, does not apply): lpmpi-bench --online, one launch each (Intel's
# launcher pins), 128 calls a size.   bash docs/results/issue50/impi_adjust/run.sh OUTDIR [N]
set -u
OUT=$(mkdir -p "${1:?outdir}" && cd "$1" && pwd); N=${2:-12}
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
IMPI=${IMPI:-/opt/impi}
SIZES=${SIZES:-8,4K,64K,1M,16M}
lscpu | grep "Model name" > "$OUT/cpu.txt"
cd /tmp || exit 1
for a in $(seq 1 "$N"); do
    I_MPI_ADJUST_ALLREDUCE=$a I_MPI_FABRICS=shm LD_LIBRARY_PATH=$IMPI/lib MPI4PY_LIBMPI=$IMPI/lib/libmpi.so.12 \
        PYTHONPATH=$ROOT LPMPI_AUTOTUNE_FILE=none timeout 1200 "$IMPI/bin/mpiexec" -n 2 "$ROOT/.venv/bin/python" \
        -m lpmpi.bench --online --sizes "$SIZES" --calls 128 --json "$OUT/impi_adj${a}_1.json" > "$OUT/impi_adj${a}_1.txt" 2>&1
    echo "$(date +%T) adjust $a: $(grep '^# worst' "$OUT/impi_adj${a}_1.txt" || tail -1 "$OUT/impi_adj${a}_1.txt")"
done
