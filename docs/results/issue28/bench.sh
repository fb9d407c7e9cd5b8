#!/bin/bash
# lpmpi.jax against mpi4jax, jitted (examples/jax_bench.py), fresh launches, every other one
# pinned (-bind-to core); then the data-parallel training step (examples/jax_train.py),
# launches alternated lpmpi / mpi4jax, every other pair pinned.  Never run two benchmarks at once.
# Usage: bash docs/results/issue28/bench.sh [LAUNCHES] [PAIRS] > bench.txt ; python3 summarize.py < bench.txt
set -u
LAUNCHES=${1:-6}
PAIRS=${2:-4}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
MPIEXEC=${MPIEXEC:-$ROOT/.venv/bin/mpiexec}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
lscpu | grep "Model name"
for i in $(seq 1 "$LAUNCHES"); do
  pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
  echo "LAUNCH $i pinned=${pin:+1}"
  timeout 900 "$MPIEXEC" $pin -n 2 "$PY" "$ROOT/examples/jax_bench.py" --sizes ${SIZES:-8,64K,1M,16M,64M} \
      --colls ${COLLS:-allreduce,allgather,bcast} --rounds ${ROUNDS:-5}
done
for i in $(seq 1 "$PAIRS"); do
  pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
  for be in lpmpi mpi4jax; do
    out=$(timeout 600 "$MPIEXEC" $pin -n 2 "$PY" "$ROOT/examples/jax_train.py" --backend $be \
          --steps 30 --hidden ${HIDDEN:-1024} --layers ${LAYERS:-4} --batch ${BATCH:-16} --lr ${LR:-0.002} | grep '^losses')
    echo "TRAIN pair=$i pinned=${pin:+1} backend=$be $out"
  done
done
