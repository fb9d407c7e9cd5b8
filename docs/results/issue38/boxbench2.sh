#!/bin/bash
# Issue 38, after the model's network term: 4 fresh launches per layout (2 and 4 pinned: each
# rank on core (global rank mod 2) by taskset, lpmpi.cluster's --bind; hydra's -bind-to core binds
# per node, which put every node's rank 0 on core 0), 1 Gbit/s tbf NICs; allreduce native / auto / lp / ring / be, then
# reduce_scatter and allgather native / auto; slowest rank's median per size (lpmpi-bench).
# A `top` snapshot of the host CPU after each launch's allreduce says whether the CPU is busy.
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
.venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
for lay in ${LAYOUTS:-1,1 2,2 1,1,1 1,1,1,1 1,2,1}; do
  for i in 1 2 3 4; do
    pin=$(box_pin $i)
    mpx=$(box_mpx $lay $pin)
    echo "== layout=$lay launch=$i pinned=$pin"
    for coll in allreduce reduce_scatter allgather; do
      algs=native,auto; [ $coll = allreduce ] && algs=native,auto,lp,ring,be
      timeout 400 $mpx .venv/bin/lpmpi-bench --collective $coll --sizes 1M,16M --algorithms $algs \
        --min-time 0.3 --reps 5 2>&1 | grep -E "^ +[0-9]+ +[a-z]+ " | awk -v c=$coll '{print c, $1, $2, $3}'
    done
  done
done
.venv/bin/python -m lpmpi.cluster down > /dev/null
