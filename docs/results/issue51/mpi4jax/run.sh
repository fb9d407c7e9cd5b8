#!/usr/bin/env bash
# mpi4jax's own tests of alltoall, gather and scatter (tests/collective_ops/test_{alltoall,gather,
# scatter}.py of github.com/mpi4jax/mpi4jax, read from a local mirror: MIRROR=its git dir) run on
# lpmpi.jax: a module named mpi4jax that is lpmpi.jax (`from lpmpi.jax import *`) comes first on
# the path.  Unchanged test files; P = 2 and 3; one pytest per rank under mpiexec.
#   MIRROR=/work/.mirror/mpi4jax+mpi4jax/repo bash docs/results/issue51/mpi4jax/run.sh OUTDIR
set -u
OUT=$(mkdir -p "${1:?outdir}" && cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
MIRROR=${MIRROR:?the mpi4jax repository (a git dir)}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
git --git-dir="$MIRROR" log -1 --format='mpi4jax commit %H (%cs)' > "$OUT/mpi4jax_commit.txt" 2>/dev/null ||
    git -C "$MIRROR" log -1 --format='mpi4jax commit %H (%cs)' > "$OUT/mpi4jax_commit.txt"
for t in alltoall gather scatter scan; do
    (git --git-dir="$MIRROR" show "HEAD:tests/collective_ops/test_$t.py" 2>/dev/null ||
     git -C "$MIRROR" show "HEAD:tests/collective_ops/test_$t.py") > "$W/test_$t.py"
done
mkdir -p "$W/shim"
printf 'from lpmpi.jax import *  # noqa: F401,F403 - mpi4jax'"'"'s names, served by lpmpi.jax\nfrom lpmpi.jax import __all__  # noqa: F401\n' > "$W/shim/mpi4jax.py"
lscpu | grep "Model name" > "$OUT/cpu.txt"
cd "$W" || exit 1
for P in 2 3; do
    PYTHONPATH="$W/shim:$ROOT" XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
        MPIR_CVAR_CH4_PROGRESS_THROTTLE=1 timeout 600 "$ROOT/.venv/bin/mpiexec" -n "$P" \
        "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider test_alltoall.py test_gather.py test_scatter.py test_scan.py \
        > "$OUT/P$P.txt" 2>&1
    echo "P=$P rc=$? $(grep -E '(passed|failed)' "$OUT/P$P.txt" | tr '\n' ' ')"
done
