#!/usr/bin/env bash
# Issue 41's costs: the flight recorder (always on) and the trace (LPMPI_TRACE) against the code
# before issue 41 (BASE: a build of 0412586), alternating launches A B C D ... in one sitting,
# half of the rounds with ranks pinned (-bind-to core).
#   BASE=/tmp/base NEW=/tmp/new bash docs/results/issue41/run.sh OUT ROUNDS
set -u
OUT=${1:-/tmp/ov41}; ROUNDS=${2:-8}; mkdir -p "$OUT"; : > "$OUT/results.txt"
PY=${PY:-.venv/bin/python}; MPIEXEC=${MPIEXEC:-.venv/bin/mpiexec}
HERE=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 1 "$ROUNDS"); do
  pin=""; [ $((r % 2)) -eq 0 ] && pin="-bind-to core"
  for cfg in ${CFGS:-base fr_on fr_off trace}; do
    case $cfg in
      base)   env="PYTHONPATH=$BASE" ;;
      fr_on)  env="PYTHONPATH=$NEW" ;;
      fr_off) env="PYTHONPATH=$NEW LPMPI_FR_SIZE=0 LPMPI_ABORT_TIMEOUT=0" ;;
      trace)  rm -rf "$OUT/trace"; env="PYTHONPATH=$NEW LPMPI_TRACE=$OUT/trace" ;;
    esac
    line=$(env $env timeout 300 $MPIEXEC $pin -n 2 $PY "$HERE/measure.py" 2>&1 | grep RESULT | tr '\n' ' ')
    echo "round $r pin=${pin:+core} $cfg $line" | tee -a "$OUT/results.txt"
  done
done
