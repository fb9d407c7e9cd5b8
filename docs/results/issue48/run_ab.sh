#!/bin/bash
# A/B of issue 48's cost: alternate launches of the tree before (A: PYTHONPATH=$BASE) and after
# (B: this checkout), in ABBA order, half pinned (-bind-to core); one JSON line per launch into $OUT.
# usage: BASE=/tmp/base OUT=ab.jsonl ROUNDS=8 run_ab.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd)
PY=$ROOT/.venv/bin/python; MPIEXEC=$ROOT/.venv/bin/mpiexec
for i in $(seq 1 "${ROUNDS:-8}"); do
  pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
  order="A B"; [ $((i % 4)) -ge 2 ] && order="B A"      # ABBA: neither build always first
  for ab in $order; do
    pp=$ROOT; [ $ab = A ] && pp=$BASE
    (cd /tmp && PYTHONPATH=$pp LPMPI_NODE_TRANSPORT=${TRANSPORT:-auto} timeout 300 $MPIEXEC $pin -n 2 $PY "$HERE/ab.py" "$ab${pin:+-pinned}") >> "$OUT"
  done
done
