#!/bin/bash
# DDP and FSDP2 step time, backend "lpmpi" against "gloo": the same script
# (examples/torch_backend_train.py, a 4-layer transformer, d = 384, ~7.5 M parameters, float32),
# fresh launches alternated lpmpi / gloo, every other pair pinned (-bind-to core).
# BATCH, SEQ (default 4, 64: sequences per rank, tokens each), OPTIM (adam), LAYERS, DIM, VOCAB
# (4, 384, 512), EXTRA (more options) and MODES (default "ddp fsdp2") from the environment.
# Usage: bash docs/results/issue27/steps.sh [PAIRS] > steps.txt ; python3 summarize_steps.py < steps.txt
set -u
PAIRS=${1:-4}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
MPIEXEC=${MPIEXEC:-$ROOT/.venv/bin/mpiexec}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}   # this checkout's lpmpi, not an installed one
lscpu | grep "Model name"
for mode in ${MODES:-ddp fsdp2}; do
  for i in $(seq 1 "$PAIRS"); do
    pin=""; [ $((i % 2)) -eq 0 ] && pin="-bind-to core"
    for be in lpmpi gloo; do
      out=$(GLOO_SOCKET_IFNAME=lo timeout 300 "$MPIEXEC" $pin -n 2 "$PY" "$ROOT/examples/torch_backend_train.py" \
            --backend $be --mode $mode --steps 12 --layers ${LAYERS:-4} --dim ${DIM:-384} --vocab ${VOCAB:-512} --batch ${BATCH:-4} --seq ${SEQ:-64} --optim ${OPTIM:-adam} ${EXTRA:-} 2>/dev/null | grep '^{')
      echo "RUN mode=$mode pair=$i pinned=${pin:+1} backend=$be $out"
    done
  done
done
