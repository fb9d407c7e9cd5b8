#!/bin/bash
# The side measurements of docs/performance-archive.md "Issue 28", over fresh launches, every other one
# pinned: eager.py (lpmpi against MPICH on numpy arrays), dispatch.py (JAX's own cost of a
# jitted call), and the 64 MiB allreduce call form with and without glibc's mmap (XLA's fresh
# result buffers).  Usage: bash launches.sh [LAUNCHES] > launches.txt
set -u
N=${1:-4}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
MPIEXEC=${MPIEXEC:-$ROOT/.venv/bin/mpiexec}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
HERE=$ROOT/docs/results/issue28
lscpu | grep "Model name"
for i in $(seq 1 "$N"); do
  pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
  echo "LAUNCH $i pinned=${pin:+1} eager $(timeout 600 "$MPIEXEC" $pin -n 2 "$PY" "$HERE/eager.py" | tr '\n' ' ')"
  echo "LAUNCH $i pinned=${pin:+1} dispatch $(timeout 600 "$MPIEXEC" $pin -n 2 "$PY" "$HERE/dispatch.py")"
  for tun in "" "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"; do
    out=$(GLIBC_TUNABLES="$tun" timeout 600 "$MPIEXEC" $pin -n 2 -genv GLIBC_TUNABLES "$tun" "$PY" \
          "$ROOT/examples/jax_bench.py" --sizes 64M --colls allreduce --rounds 3 |
          grep -E "^allreduce (lpmpi.jax|mpi4jax) call " | sed -E 's/^allreduce (\S+) call +([0-9.]+).*/\1=\2us/' | tr '\n' ' ')
    echo "LAUNCH $i pinned=${pin:+1} 64MiB-call tunables=[${tun}] $out"
  done
done
