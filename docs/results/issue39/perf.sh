#!/usr/bin/env bash
# Issue 39: the new collectives against MPICH's own at P = 2, over fresh launches, half pinned
# (-bind-to core), every size of the issue's claim; one JSON per (collective, launch).
#   bash docs/results/issue39/perf.sh [OUT_DIR] [LAUNCHES]
# Summary: python docs/results/issue39/summarize.py OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${1:-docs/results/issue39/perf}
N=${2:-4}
mkdir -p "$OUT"
PY=.venv/bin/python
MPX=.venv/bin/mpiexec
for i in $(seq 1 "$N"); do
  pin=""
  [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
  for c in alltoall allgatherv scatter gather alltoallv; do
    echo "launch $i ($c) ${pin:-unpinned}"
    timeout 900 $MPX -n 2 $pin $PY -m lpmpi.bench --collective "$c" \
      --sizes 1K,4K,16K,64K,256K,1M,4M,16M,64M --algorithms auto,native --no-check \
      --json "$OUT/${c}_$i.json" > "$OUT/${c}_$i.txt" 2>&1
  done
done
