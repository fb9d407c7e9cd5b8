#!/bin/bash
# Issue 49's box measurements: compressed against uncompressed float32 SUM allreduce across the
# cluster in a box, several fresh launches per layout (odd launches pinned with --bind), then
# the link-rate sweep (2 nodes of 1 rank, 16 MiB) for docs/compression.md's figure.
#   bash docs/results/issue49/run_box.sh OUTDIR          (as root; ~15 min)
# Writes OUTDIR/layout_<layout>_<i>.json and OUTDIR/rate_<rate>_<i>.json (box_bench.py's line).
set -u
OUT=${1:?outdir}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-$(cd "$HERE/../../.." && pwd)/.venv/bin/python}
cd "$HERE/../../../tests" || exit 1          # the installed lpmpi, not the source tree
LAUNCHES=${LAUNCHES:-4}
LAYOUTS=${LAYOUTS:-1,1 2,2 1,1,1,1}
box() { timeout 120 "$PY" -m lpmpi.cluster "$@"; }
one() {   # one launch: $1 layout, $2 out file, $3 sizes, $4 reps, $5 bind (0/1)
    local bind=(); [ "$5" = 1 ] && bind=(--bind)
    timeout 600 "$PY" -m lpmpi.cluster run --layout "$1" "${bind[@]}" -- \
        "$PY" "$HERE/box_bench.py" "$3" "$4" > "$2.tmp" 2>"$2.err"
    grep '^{' "$2.tmp" > "$2" || { echo "launch failed: $2"; cat "$2.err" | tail -5; }
    rm -f "$2.tmp"
}
for layout in $LAYOUTS; do
    nodes=$(echo "$layout" | tr ',' '\n' | wc -l)
    box down >/dev/null 2>&1
    box up --nodes "$nodes" --rate 1gbit >/dev/null || exit 1
    for i in $(seq 1 "$LAUNCHES"); do
        echo "$(date +%T) layout $layout launch $i (bind $((i % 2)))"
        one "$layout" "$OUT/layout_${layout//,/x}_$i.json" 16,64 5 $((i % 2))
    done
done
for rate in ${RATES:-1gbit 2500mbit 5gbit 10gbit none}; do
    box down >/dev/null 2>&1
    box up --nodes 2 --rate "$rate" >/dev/null || exit 1
    for i in 1 2; do
        echo "$(date +%T) rate $rate launch $i"
        one 1,1 "$OUT/rate_${rate}_$i.json" 16 7 $((i % 2))
    done
done
box down >/dev/null 2>&1
echo done
