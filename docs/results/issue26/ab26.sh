#!/bin/bash
# A/B of the blocking allreduce, base (0844e50, before issue 26) vs new, alternated, half pinned
M=/work/main; OUT=/tmp/w/ab26; mkdir -p $OUT; rm -f $OUT/*.log
for i in 1 2 3 4; do
  for pin in "" "-bind-to core"; do
    for b in base new; do
      d=$M; [ $b = base ] && d=/tmp/w/base
      echo "=== $b round $i pin=[$pin]" >> $OUT/$b.log
      PYTHONPATH=$d timeout 300 $M/.venv/bin/mpiexec $pin -n 2 $M/.venv/bin/python -m lpmpi.bench --sizes 8,1M,64M --algorithms auto,native --no-bandwidth >> $OUT/$b.log 2>&1
    done
  done
done
