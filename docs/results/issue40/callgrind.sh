#!/usr/bin/env bash
# Per-call instructions of lpmpi's own code (the _core extension's self cost: src/*.c and the
# Cython module) for an 8 B allreduce at P = 2, the tuner off and on: callgrind on both ranks,
# 5000 minus 1000 calls (issue 25's method).   bash docs/results/issue40/callgrind.sh OUTDIR
set -u
OUT=${1:-/tmp/cg40}; mkdir -p "$OUT"
PY=${PY:-.venv/bin/python}; MPIEXEC=${MPIEXEC:-.venv/bin/mpiexec}
for at in 0 1; do
  for n in 1000 5000; do
    LPMPI_AUTOTUNE=$at PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 timeout 900 $MPIEXEC -n 2 \
      valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.at$at.n$n.%q{PMI_RANK}" $PY -c "
import numpy as np, lpmpi
from mpi4py import MPI
x = np.ones(2, np.float32); y = np.empty_like(x)
for _ in range($n):
    lpmpi.allreduce(x, y)
" > "$OUT/log.at$at.n$n.txt" 2>&1
  done
done
for at in 0 1; do
  for r in 0 1; do
    for n in 1000 5000; do
      callgrind_annotate --threshold=100 "$OUT/cg.at$at.n$n.$r" 2>/dev/null | \
        awk '/_core[.]cpython/ {gsub(",","",$1); s+=$1} END {print s+0}' > "$OUT/self.at$at.n$n.$r"
    done
    a=$(cat "$OUT/self.at$at.n1000.$r"); b=$(cat "$OUT/self.at$at.n5000.$r")
    echo "LPMPI_AUTOTUNE=$at rank $r: lpmpi's own instructions per call $(( (b - a) / 4000 ))"
  done
done | tee "$OUT/summary.txt"
