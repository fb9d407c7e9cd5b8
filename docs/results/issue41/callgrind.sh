#!/usr/bin/env bash
# Per-call instructions of lpmpi's own code (the _core extension's self cost: src/*.c and the
# Cython module) for an 8 B allreduce at P = 2: before issue 41 (BASE), the flight recorder on
# (the default) and off (LPMPI_FR_SIZE=0), the trace on (LPMPI_TRACE).  callgrind on both
# ranks, 5000 minus 1000 calls (issue 25's and 40's method).
#   BASE=/tmp/base NEW=/tmp/new bash docs/results/issue41/callgrind.sh OUTDIR
set -u
OUT=${1:-/tmp/cg41}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-$(pwd)/.venv/bin/python}; MPIEXEC=${MPIEXEC:-$(pwd)/.venv/bin/mpiexec}
cd /tmp
for cfg in ${CFGS:-base fr_on fr_off trace}; do
  case $cfg in
    base)   env="PYTHONPATH=$BASE" ;;
    fr_on)  env="PYTHONPATH=$NEW" ;;
    fr_off) env="PYTHONPATH=$NEW LPMPI_FR_SIZE=0 LPMPI_ABORT_TIMEOUT=0" ;;
    trace)  env="PYTHONPATH=$NEW LPMPI_TRACE=$OUT/trace" ;;
  esac
  for n in 1000 5000; do
    env $env PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 timeout 900 $MPIEXEC -n 2 \
      valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$cfg.n$n.%q{PMI_RANK}" $PY -c "
import numpy as np, lpmpi
from mpi4py import MPI
x = np.ones(2, np.float32); y = np.empty_like(x)
for _ in range($n):
    lpmpi.allreduce(x, y)
" > "$OUT/log.$cfg.n$n.txt" 2>&1
  done
done
for cfg in ${CFGS:-base fr_on fr_off trace}; do
  for r in 0 1; do
    for n in 1000 5000; do
      # (inlined code of src/*.h counted too: selfcost.py)
      $PY "$HERE/selfcost.py" "$OUT/cg.$cfg.n$n.$r" > "$OUT/self.$cfg.n$n.$r"
      callgrind_annotate --threshold=100 "$OUT/cg.$cfg.n$n.$r" 2>/dev/null | \
        awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1+0}' > "$OUT/total.$cfg.n$n.$r"
    done
    a=$(cat "$OUT/self.$cfg.n1000.$r"); b=$(cat "$OUT/self.$cfg.n5000.$r")
    ta=$(cat "$OUT/total.$cfg.n1000.$r"); tb=$(cat "$OUT/total.$cfg.n5000.$r")
    echo "$cfg rank $r: lpmpi's own instructions per call $(( (b - a) / 4000 )), whole process $(( (tb - ta) / 4000 ))"
  done
done | tee "$OUT/summary.txt"
