#!/usr/bin/env bash
# Issue 39: per-call time at 8 B of the five collectives that existed before it, A (e3d0b22, the
# engine before issue 39, built in a worktree at $A) against B (this tree), alternated A B A B
# in one sitting, each round 2 fresh launches (1 unpinned, 1 pinned -bind-to core).
#   git worktree add /tmp/A e3d0b22 && (cd /tmp/A && ../../work/main/.venv/bin/python setup.py build_ext --inplace)
#   bash docs/results/issue39/ab_overhead.sh [OUT] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${1:-docs/results/issue39/ab}
R=${2:-4}
A=${A:-/tmp/A}
mkdir -p "$OUT"
for r in $(seq 1 "$R"); do
  for v in A B; do
    for pin in "" "-bind-to core"; do
      tag="${v}_${r}_$([ -n "$pin" ] && echo pinned || echo free)"
      pp=$([ "$v" = A ] && echo "$A" || echo "$PWD")
      for c in allreduce reduce bcast allgather reduce_scatter; do
        PYTHONPATH=$pp timeout 300 .venv/bin/mpiexec -n 2 $pin .venv/bin/python -m lpmpi.bench \
          --collective $c --sizes 8 --algorithms auto,native --no-check --no-bandwidth \
          --min-time 0.3 --json "$OUT/${tag}_$c.json" > /dev/null 2>&1
      done
      echo "$tag done"
    done
  done
done
