#!/bin/bash
# Issue 38: where the CPU, not the NIC, sets the time.  2 nodes x 1 rank (2 ranks on the 2 cores:
# not oversubscribed), NIC rates 1, 2, 5, 10 Gbit/s and unshaped; allreduce 16 MiB native / auto
# / lp / ring, 2 fresh launches per rate (the second pinned by global rank); the machine's CPU
# time over each launch from /proc/stat (user, system, softirq, idle: % of both cores).
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
for rate in 1gbit 2gbit 5gbit 10gbit none; do
  .venv/bin/python -m lpmpi.cluster up --nodes 2 --rate $rate > /dev/null
  for i in 1 2; do
    pin=False; [ $i -eq 2 ] && pin=True
    mpx=$(box_mpx 1,1 $pin)
    echo "== layout=1,1 rate=$rate launch=$i pinned=$pin"
    s0=$(head -1 /proc/stat)
    timeout 600 $mpx .venv/bin/lpmpi-bench --collective allreduce --sizes 16M --algorithms native,auto,lp,ring \
      --min-time 0.5 --reps 5 2>&1 | grep -E "^ +[0-9]+ +[a-z]+ " | awk '{print "allreduce", $1, $2, $3}'
    s1=$(head -1 /proc/stat)
    python3 - "$s0" "$s1" <<'PY'
import sys
a = [int(x) for x in sys.argv[1].split()[1:]]; b = [int(x) for x in sys.argv[2].split()[1:]]
d = [y - x for x, y in zip(a, b)]; t = sum(d) or 1
# /proc/stat cpu: user nice system idle iowait irq softirq steal
print(f"cpu user {100*(d[0]+d[1])/t:.0f}% system {100*d[2]/t:.0f}% softirq {100*d[6]/t:.0f}% idle {100*(d[3]+d[4])/t:.0f}%")
PY
  done
done
.venv/bin/python -m lpmpi.cluster down > /dev/null
