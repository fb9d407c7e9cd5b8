#!/bin/bash
# every 15 s: cross-core probe + shm at 16/32/64 MiB (64 in place too) + cma 64 MiB (holds the bench lock)
export PATH=/work/main/.venv/bin:$PATH MPIR_CVAR_CH4_PROGRESS_THROTTLE=1 PYTHONPATH=/tmp/w/base
while true; do
  flock /tmp/w/bench.lock bash -c '
    d=$(date +%H:%M:%S); p=$(/tmp/w/c2c 0 1 | sed "s/ (2x.*//")
    line="$d | $p"
    for spec in "16777216 shm" "33554432 shm" "67108864 shm" "67108864 shm inplace" "67108864 cma"; do set -- $spec
      v=$(LPMPI_NODE_TRANSPORT=$2 timeout 60 mpiexec -bind-to core -n 2 python /tmp/w/t64.py $1 ring 1048576 10 $3 | sed "s/.*med=\([0-9.]*\)us.*/\1/")
      line="$line | $(($1>>20))M $2 $3 $v"
    done
    echo "$line"' >> /tmp/w/monitor3.log
  sleep 10
done
