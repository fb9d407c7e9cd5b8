#!/bin/bash
# Issue 38: 64 MiB allreduce (native / auto) and the flatness of lp's bcast and reduce against
# mst's log N growth (16 MiB, 2 to 4 nodes of one rank), in the box at 1 Gbit/s; 4 fresh
# launches per layout, 2 and 4 pinned (lpmpi.cluster --bind: global rank mod cores).
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
.venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
for lay in ${LAYOUTS:-1,1 2,2 1,1,1 1,1,1,1 1,2,1}; do
  for i in 1 2 3 4; do
    pin=$(box_pin $i)
    mpx=$(box_mpx $lay $pin)
    echo "== layout=$lay launch=$i pinned=$pin"
    timeout 600 $mpx .venv/bin/lpmpi-bench --collective allreduce --sizes 64M --algorithms native,auto \
      --min-time 0.3 --reps 3 --warmup 1 2>&1 | grep -E "^ +[0-9]+ +[a-z]+ " | awk '{print "allreduce", $1, $2, $3}'
    case $lay in *,2*|2,*) continue;; esac
    for coll in bcast reduce; do
      timeout 600 $mpx .venv/bin/lpmpi-bench --collective $coll --sizes 16M --algorithms native,auto,lp,mst \
        --min-time 0.3 --reps 3 --warmup 1 2>&1 | grep -E "^ +[0-9]+ +[a-z]+ " | awk -v c=$coll '{print c, $1, $2, $3}'
    done
  done
done
.venv/bin/python -m lpmpi.cluster down > /dev/null
