#!/bin/bash
# Issue 49's DDP measurements in the cluster in a box (1 Gbit/s NICs; as root; ~20 min):
#  1. step time of examples/ddp_torch.py (default width: 300 K parameters, network-bound across
#     the box) on 2 nodes of 1 rank and 4 nodes of 1 rank: gloo, gloo + torch's
#     fp16_compress_hook, "lpmpi" (exact), lpmpi int8 and int4 with error feedback; LAUNCHES
#     rounds, the configurations interleaved within each round, odd rounds pinned (--bind);
#  2. the loss curve at 4 ranks across the box: uncompressed, seeds 0, 1, 2; int8 and int4 with
#     error feedback, seed 0 (80 steps; the parameters' npz, losses included).
#   bash docs/results/issue49/ddp_box.sh OUTDIR
# Writes OUTDIR/step_<layout>_<config>_<i>.txt (the run's output) and OUTDIR/loss_*.npz.
set -u
OUT=${1:?outdir}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
EX=$ROOT/examples/ddp_torch.py
cd "$ROOT/tests" || exit 1
LAUNCHES=${LAUNCHES:-3}
STEPS=${STEPS:-150}
box() { timeout 120 "$PY" -m lpmpi.cluster "$@"; }
declare -A CONF=(
    [gloo]="--hook gloo"
    [gloo-fp16]="--hook gloo --fp16-hook"
    [lpmpi]="--hook lpmpi"
    [lpmpi-int8-ef]="--hook lpmpi --compression int8 --error-feedback"
    [lpmpi-int4-ef]="--hook lpmpi --compression int4 --error-feedback"
)
ORDER=${ORDER:-gloo gloo-fp16 lpmpi lpmpi-int8-ef lpmpi-int4-ef}
run1() {   # $1 layout, $2 out file, $3 bind (0/1), rest: the example's arguments
    local layout=$1 out=$2 bind=(); [ "$3" = 1 ] && bind=(--bind); shift 3
    timeout 900 "$PY" -m lpmpi.cluster run --layout "$layout" "${bind[@]}" -- \
        "$PY" "$EX" "$@" > "$out" 2>&1 || echo "FAILED: $out (exit $?)"
}
box down >/dev/null 2>&1
box up --nodes 4 --rate 1gbit >/dev/null || exit 1
for layout in ${LAYOUTS:-1,1 1,1,1,1}; do
    for i in $(seq 1 "$LAUNCHES"); do
        for c in $ORDER; do
            echo "$(date +%T) step time: layout $layout $c round $i (bind $((i % 2)))"
            # shellcheck disable=SC2086
            run1 "$layout" "$OUT/step_${layout//,/x}_${c}_$i.txt" $((i % 2)) ${CONF[$c]} \
                --steps "$STEPS" --log 1000
            grep -h "median step time" "$OUT/step_${layout//,/x}_${c}_$i.txt"
        done
    done
done
if [ "${LOSS:-1}" = 1 ]; then
    for s in 0 1 2; do
        echo "$(date +%T) loss: uncompressed seed $s"
        run1 1,1,1,1 "$OUT/loss_none_$s.txt" 0 --hook lpmpi --steps 80 --log 40 --seed "$s" \
            --save "$OUT/loss_none_$s.npz"
    done
    for c in int8 int4; do
        echo "$(date +%T) loss: $c + error feedback seed 0"
        run1 1,1,1,1 "$OUT/loss_${c}_0.txt" 0 --hook lpmpi --compression "$c" --error-feedback \
            --steps 80 --log 40 --seed 0 --save "$OUT/loss_${c}_0.npz"
    done
fi
box down >/dev/null 2>&1
echo done
