#!/usr/bin/env bash
# A settled key's per-call overhead at 8 B, tuner on against off, both on MPI's own (the static
# choice with no table; a learned-rows file holding native for 8 B as the tuner's settled
# choice), N launches each, alternating, odd launches -bind-to core (ov8.py: the median of 7 x
# 20000 calls, the slowest rank).
#   bash docs/results/issue50/overhead8/run.sh OUT.txt [N]
set -u
OUT=$(cd "$(dirname "${1:?out file}")" && pwd)/$(basename "$1"); N=${2:-10}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../../.." && pwd)
F=$(mktemp -d)/ov8native.json
cd /tmp || exit 1
# the learned row: one run of the tuner at 8 B writes the file, then its row is set to native
LPMPI_TUNING_FILE=none LPMPI_AUTOTUNE=1 LPMPI_AUTOTUNE_FILE=$F timeout 300 "$ROOT/.venv/bin/mpiexec" -n 2 \
    "$ROOT/.venv/bin/python" -c "
import numpy as np, lpmpi
from mpi4py import MPI
c = MPI.COMM_WORLD.Dup(); x = np.ones(2, np.float32); y = np.empty_like(x)
for i in range(400): lpmpi.allreduce(x, y, comm=c)" > /dev/null 2>&1
"$ROOT/.venv/bin/python" - "$F" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for doc in (d if isinstance(d, list) else [d]):
    for rows in doc["collectives"].values():
        for r in rows:
            r["algorithm"], r["chunk_bytes"] = "native", None
            r.pop("transport", None)
            for m in r.get("measured", []):      # its time: MPI's own's (the reference of the drift watch)
                m["time_us"] = m["native_us"]
json.dump(d, open(sys.argv[1] + ".native", "w"))
PY
lscpu | grep "Model name" > "$OUT"
for i in $(seq 1 "$N"); do
    PIN=""; [ $((i % 2)) = 1 ] && PIN="-bind-to core"
    for at in 0 1; do
        cp "$F.native" "$F"
        r=$(LPMPI_TUNING_FILE=none LPMPI_AUTOTUNE=$at LPMPI_AUTOTUNE_FILE=$F timeout 300 "$ROOT/.venv/bin/mpiexec" -n 2 $PIN \
            "$ROOT/.venv/bin/python" "$HERE/ov8.py" 2>&1 | tail -1)
        echo "launch $i pin=${PIN:+y} at=$at $r" | tee -a "$OUT"
    done
done
