#!/bin/bash
# Issue 38, after the model's network term: 4 fresh launches per layout (2 and 4 pinned: each
# rank on core (global rank mod 2) by taskset, lpmpi.cluster's --bind; hydra's -bind-to core binds
# per node, which put every node's rank 0 on core 0), 1 Gbit/s tbf NICs; allreduce native / auto / lp / ring / be, then
# reduce_scatter and allgather native / auto; slowest rank's median per size (lpmpi-bench).
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
launch() {
  for coll in allreduce reduce_scatter allgather; do
    algs=native,auto; [ $coll = allreduce ] && algs=native,auto,lp,ring,be
    box_bench "$2" $coll 400 --sizes 1M,16M --algorithms $algs --min-time 0.3 --reps 5
  done
}
box_launches launch
