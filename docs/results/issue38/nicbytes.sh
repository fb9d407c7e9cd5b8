#!/bin/bash
# Bytes each node's NIC sent in one call of every algorithm of every collective, against the
# cost model's count (lpmpi.model.net_traffic) and the engine's own count, in the box at
# 1 Gbit/s: layouts 2x2, 3x1, 4x1 and 1-2-1 (bench --node-bytes; the NICs read by each node's
# lowest rank from its namespace's /sys/class/net).
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
.venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
for lay in 2,2 1,1,1 1,1,1,1 1,2,1; do
  mpx=$(box_mpx $lay)
  echo "== layout=$lay"
  timeout 600 $mpx .venv/bin/python -m lpmpi.bench --node-bytes --collective all --sizes 1MiB,16MiB --root 1 \
    --json /tmp/nicbytes_$lay.json 2>&1 | grep -v "^# [a-z/]* *:\|^#  \|^$"
  .venv/bin/python - "$lay" <<'PY'
import json, sys
doc = json.load(open(f"/tmp/nicbytes_{sys.argv[1]}.json"))
worst = 0.0
for r in doc["node_bytes"]:
    if r["algorithm"] == "native" or not r["nic_per_node"]:
        continue
    for (nic, _), m in zip(r["nic_per_node"], r["model_bytes_per_node"]):
        if m >= 0.25 * r["nbytes"]:
            worst = max(worst, abs(nic / m - 1))
print(f"largest |NIC / model - 1| over lpmpi's algorithms (nodes sending >= n/4): {100 * worst:.2f}%")
PY
done
.venv/bin/python -m lpmpi.cluster down > /dev/null
