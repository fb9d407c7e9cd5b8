#!/usr/bin/env bash
# Issue 51's per-call item: every collective's auto, MPI's own through lpmpi (native) and
# mpi4py's direct call at 8 B-64 KiB, P = 2, two builds alternating launch by launch (A B A B
# ...), every other pair pinned (-bind-to core).
#   BASE=/tmp/base bash docs/results/issue51/percall/run.sh OUTDIR [PAIRS]
set -u
OUT=$(mkdir -p "${1:?outdir}" && cd "$1" && pwd); N=${2:-4}
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
BASE=${BASE:?the other build (a source tree built in place)}
lscpu | grep "Model name" > "$OUT/cpu.txt"
cd /tmp || exit 1
for i in $(seq 1 "$N"); do
    PIN=""; [ $((i % 2)) = 0 ] && PIN="-bind-to core"
    for b in base new; do
        tree=$ROOT; [ $b = base ] && tree=$BASE
        PYTHONPATH=$tree timeout 600 "$ROOT/.venv/bin/mpiexec" -n 2 $PIN "$ROOT/.venv/bin/python" -m lpmpi.bench \
            --collective all --sizes 8,4K,64K --algorithms auto,native,mpi4py --min-time 0.2 \
            --json "$OUT/${b}_$i.json" > "$OUT/${b}_$i.txt" 2>&1
        echo "$(date +%T) ${b}_$i rc=$?"
    done
done
