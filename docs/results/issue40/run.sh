#!/usr/bin/env bash
# Issue 40's measurements (P = 2, this machine): every launch fresh, half pinned (-bind-to core).
#   bash docs/results/issue40/run.sh OUTDIR
set -u
OUT=${1:-/tmp/issue40}
mkdir -p "$OUT"
MPIEXEC=${MPIEXEC:-.venv/bin/mpiexec}
LPB=${LPB:-.venv/bin/lpmpi-bench}   # (a frozen build: LPB="env PYTHONPATH=/tmp/meas .venv/bin/python -m lpmpi.bench")
SIZES=${SIZES:-4K,64K,1M,16M,64M}
lscpu | grep "Model name" > "$OUT/cpu.txt"
for i in 1 2 3 4; do
  pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
  # (a) no applicable table: the cost model is the start
  LPMPI_TUNING_FILE=none timeout 900 $MPIEXEC -n 2 $pin $LPB --online --sizes $SIZES --calls 128 \
      --json "$OUT/model_$i.json" > "$OUT/model_$i.txt" 2>&1
  # (b) the shipped table (launches 1 and 2: one unpinned, one pinned)
  [ $i -le 2 ] && [ $i -eq 2 ] && pin="-bind-to core"
  [ $i -le 2 ] && timeout 900 $MPIEXEC -n 2 $pin $LPB --online --sizes $SIZES --calls 128 \
      --json "$OUT/table_$i.json" > "$OUT/table_$i.txt" 2>&1
  pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
  # (d) settled overhead at 8 B: auto under the tuner against the algorithm it settles on (mst at
  # 8 B here), explicit, so untuned; interleaved by the harness
  LPMPI_AUTOTUNE=1 timeout 300 $MPIEXEC -n 2 $pin $LPB --sizes 8,64 --algorithms auto,mst,native \
      --min-time 1.0 --json "$OUT/overhead_$i.json" > "$OUT/overhead_$i.txt" 2>&1
  timeout 300 $MPIEXEC -n 2 $pin $LPB --sizes 8,64 --algorithms auto,mst,native \
      --min-time 1.0 --json "$OUT/overhead_off_$i.json" > "$OUT/overhead_off_$i.txt" 2>&1
done
for i in 1 2; do
  pin=""; [ $i -eq 2 ] && pin="-bind-to core"
  # (c) a busy process joins after the choice settled, then leaves
  LPMPI_TUNING_FILE=none timeout 1200 $MPIEXEC -n 2 $pin $LPB --online --busy --sizes 64K,1M,64M --calls 128 \
      --json "$OUT/busy_$i.json" --plot "$OUT/busy_$i.png" > "$OUT/busy_$i.txt" 2>&1
done
