#!/bin/bash
# Issue 38: the polling waits with a busy process beside the ranks (one python spinning, not
# pinned), 2x2 and 4x1, allreduce 1 and 16 MiB native / auto, 2 fresh launches each (the second
# pinned by global rank), 1 Gbit/s.
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
.venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
python3 -c "while True: pass" & busy=$!
for lay in 2,2 1,1,1,1; do
  for i in 1 2; do
    pin=False; [ $i -eq 2 ] && pin=True
    mpx=$(box_mpx $lay $pin)
    echo "== layout=$lay launch=$i pinned=$pin busy=1"
    timeout 600 $mpx .venv/bin/lpmpi-bench --collective allreduce --sizes 1M,16M --algorithms native,auto \
      --min-time 0.3 --reps 5 2>&1 | grep -E "^ +[0-9]+ +[a-z]+ " | awk '{print "allreduce", $1, $2, $3}'
  done
done
kill $busy
.venv/bin/python -m lpmpi.cluster down > /dev/null
