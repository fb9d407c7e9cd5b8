#!/bin/bash
# Issue 38: 64 MiB allreduce (native / auto) and the flatness of lp's bcast and reduce against
# mst's log N growth (16 MiB, 2 to 4 nodes of one rank), in the box at 1 Gbit/s; 4 fresh
# launches per layout, 2 and 4 pinned (lpmpi.cluster --bind: global rank mod cores).
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
launch() {
  box_bench "$2" allreduce 600 --sizes 64M --algorithms native,auto --min-time 0.3 --reps 3 --warmup 1
  case $1 in *,2*|2,*) return;; esac
  for coll in bcast reduce; do
    box_bench "$2" $coll 600 --sizes 16M --algorithms native,auto,lp,mst --min-time 0.3 --reps 3 --warmup 1
  done
}
box_launches launch
