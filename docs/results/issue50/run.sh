#!/usr/bin/env bash
# Issue 50's measurements (P = 2): the online tuner's training loop (lpmpi-bench --online: per
# size, --calls calls of auto under LPMPI_AUTOTUNE=1 on a fresh communicator; then the grid, MPI's
# own and the settled call side by side) under Intel MPI (its default algorithms, and
# I_MPI_ADJUST_ALLREDUCE=8) and MPICH, from the shipped table and from none.
#   bash docs/results/issue50/run.sh OUTDIR [LAUNCHES]
# Needs impi-rt in $IMPI (pip install --prefix "$IMPI" impi-rt) and the venv's lpmpi built (the
# source tree's, through PYTHONPATH).
set -u
OUT=$(mkdir -p "${1:?outdir}" && cd "$1" && pwd); N=${2:-2}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY=$ROOT/.venv/bin/python
BUILD=${BUILD:-$ROOT}      # the lpmpi tree to run (PYTHONPATH): another build for an A/B
TAG=${TAG:-}
IMPI=${IMPI:-/opt/impi}
SIZES=${SIZES:-8,4K,64K,256K,1M,16M}
CALLS=${CALLS:-128}
lscpu | grep "Model name" > "$OUT/cpu.txt"
cd /tmp || exit 1
bench() {   # $1 name, then env assignments; the launcher chosen by LIB
    local name=$1$TAG; shift
    if [ "$LIB" = impi ]; then
        env "$@" I_MPI_FABRICS=shm LD_LIBRARY_PATH=$IMPI/lib MPI4PY_LIBMPI=$IMPI/lib/libmpi.so.12 PYTHONPATH=$BUILD \
            timeout 1200 "$IMPI/bin/mpiexec" -n 2 "$PY" -m lpmpi.bench --online --sizes "$SIZES" --calls "$CALLS" \
            --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    else
        env "$@" PYTHONPATH=$BUILD timeout 1200 "$ROOT/.venv/bin/mpiexec" -n 2 $PIN "$PY" -m lpmpi.bench --online \
            --sizes "$SIZES" --calls "$CALLS" --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    fi
    echo "$(date +%T) $name: $(grep -c '^ ' "$OUT/$name.txt") rows; $(grep '^# worst' "$OUT/$name.txt")"
}
for i in $(seq 1 "$N"); do
    PIN=""; [ $((i % 2)) = 0 ] && PIN="-bind-to core"
    LIB=impi bench "impi_adj8_table_$i" I_MPI_ADJUST_ALLREDUCE=8
    LIB=impi bench "impi_adj8_none_$i" I_MPI_ADJUST_ALLREDUCE=8 LPMPI_TUNING_FILE=none
    LIB=impi bench "impi_default_$i" LPMPI_TUNING_FILE=none
    LIB=mpich bench "mpich_none_$i" LPMPI_TUNING_FILE=none
done
