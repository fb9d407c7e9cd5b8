#!/usr/bin/env bash
# Per-call instructions of lpmpi's own code (the _core extension's self cost, issue 41's
# selfcost.py) at P = 2, 8 B: before issue 48 (BASE) and after (this checkout), for the calls the
# change touches: allreduce auto (mst over MPI: a blocking MPI wait, now with its wake-up
# request), bcast mst (the same, one receive), allreduce native (MPI's blocking collective: its
# slot's two stores).  callgrind on both ranks, 5000 minus 1000 calls.
#   BASE=/tmp/base bash docs/results/issue48/callgrind.sh OUTDIR
set -u
OUT=${1:-/tmp/cg48}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd)
PY=$ROOT/.venv/bin/python; MPIEXEC=$ROOT/.venv/bin/mpiexec
cd /tmp
for call in "allreduce(x, y)" "bcast(x, algorithm='mst')" "allreduce(x, y, algorithm='native')"; do
  tag=$(echo "$call" | tr -dc 'a-z')
  for cfg in base new; do
    pp=$ROOT; [ $cfg = base ] && pp=$BASE
    for n in 1000 5000; do
      env PYTHONPATH=$pp PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 timeout 900 $MPIEXEC -n 2 \
        valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$tag.$cfg.n$n.%q{PMI_RANK}" $PY -c "
import numpy as np, lpmpi
x = np.ones(2, np.float32); y = np.empty_like(x)
for _ in range($n):
    lpmpi.$call
" > "$OUT/log.$tag.$cfg.n$n.txt" 2>&1
      for r in 0 1; do
        $PY "$ROOT/docs/results/issue41/selfcost.py" "$OUT/cg.$tag.$cfg.n$n.$r" > "$OUT/self.$tag.$cfg.n$n.$r"
      done
    done
    for r in 0 1; do
      a=$(cat "$OUT/self.$tag.$cfg.n1000.$r"); b=$(cat "$OUT/self.$tag.$cfg.n5000.$r")
      echo "$call $cfg rank $r: lpmpi's own instructions per call $(( (b - a) / 4000 ))"
    done
  done
done | tee "$OUT/summary.txt"
