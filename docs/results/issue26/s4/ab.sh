#!/bin/bash
# A/B of the blocking allreduce: base 0844e50 (before issue 26) vs new (after steps 1-4 and the
# new collectives), alternated, half pinned; fresh launches.  AMD EPYC (2 vCPUs), MPICH 5.0.2.
M=/work/main; B=/tmp/wt_0844; OUT=${OUT:-/tmp/w/ab_s4}; mkdir -p $OUT; rm -f $OUT/*.log
unset MPIR_CVAR_CH4_PROGRESS_THROTTLE
for i in 1 2 3 4; do
  for pin in "" "-bind-to core"; do
    for b in base new; do
      d=$M; [ $b = base ] && d=$B
      echo "=== $b round $i pin=[$pin]" >> $OUT/$b.log
      PYTHONPATH=$d timeout 300 $M/.venv/bin/mpiexec $pin -n 2 $M/.venv/bin/python -m lpmpi.bench --sizes 8,1M,64M --algorithms auto,native --no-bandwidth --min-time 0.5 >> $OUT/$b.log 2>&1
    done
  done
done
