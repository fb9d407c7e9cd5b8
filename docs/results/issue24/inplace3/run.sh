#!/bin/bash
# A/B: base (HEAD) vs new (working tree), alternated, half pinned; nt_probe before each pair
export MPIR_CVAR_CH4_PROGRESS_THROTTLE=1
M=/work/main; OUT=${OUT:-/tmp/w/ab1}; ROUNDS=${ROUNDS:-4}; ARGS=${ARGS:---sizes 16M,64M --algorithms lp,auto --forms blocking,inplace --fresh-input --no-bandwidth}
for i in $(seq 1 $ROUNDS); do
  for pin in "" "-bind-to core"; do
    /tmp/w/nt_probe 10 | grep ratio | sed "s/^/probe r$i [$pin] /" >> $OUT/probe.log
    for b in base new; do
      d=$M; [ $b = base ] && d=/tmp/w/base
      echo "=== $b round $i pin=[$pin]" >> $OUT/$b.log
      PYTHONPATH=$d timeout 300 $M/.venv/bin/mpiexec $pin -n 2 $M/.venv/bin/python -m lpmpi.bench $ARGS >> $OUT/$b.log 2>&1
    done
  done
done
