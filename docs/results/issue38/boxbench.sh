#!/bin/bash
# 4 fresh launches per layout, launches 2 and 4 pinned (hydra -bind-to core), 1 Gbit/s tbf NICs
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
.venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
for lay in 1,1 2,2 1,1,1,1; do
  for i in 1 2 3 4; do
    pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
    echo "== layout=$lay launch=$i pin=${pin:-none}"
    mpx=$(box_mpx $lay)
    timeout 300 $mpx $pin .venv/bin/lpmpi-bench --sizes 1M,16M --algorithms native,auto,lp --min-time 0.3 --reps 5 2>&1 | grep -E "^ +[0-9]+ +(native|auto|lp) " | awk '{print $1, $2, $3}'
  done
done
.venv/bin/python -m lpmpi.cluster down
