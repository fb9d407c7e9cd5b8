#!/usr/bin/env bash
# The GPU check of lpmpi, on a machine with one GPU and no network, in under 5 minutes:
#   1. a virtual environment that sees the machine's packages (CuPy, Cython, numpy, pytest)
#      plus MPICH and mpi4py installed from the wheels in .whl/ (no network);
#   2. lpmpi built in place with nvcc (LPMPI_CUDA=1: failing to build the CUDA part fails);
#   3. the GPU tests (tests/gpu: the contract on CuPy arrays and PyTorch CUDA tensors) at
#      P = 1, 2, 3, in parallel with pytest-xdist where present;
#   4. python -m lpmpi.bench --memory cuda at P = 2: staged LP against "copy to host + MPI's
#      native allreduce + copy back" (the native row on device memory), float32 up to 64 MiB.
# Logs and the benchmark's JSON go to $OUT when set (else /tmp/lpmpi-device-check).
# Exit status 0 only if every step passed; the last lines say which step failed.
#
# Fill .whl/ once, on a machine with network, for the GPU machine's Python (3.12, x86_64):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     --platform manylinux1_x86_64 -d .whl mpich==5.0.2 mpi4py==4.1.2
# (.whl/ is git-ignored; it must travel with the checkout, e.g. as a carried path.)
# Knobs: PYTHON (default python3), LPMPI_CUDA_ARCHS (default: the GPU's own, from nvidia-smi),
# DEVICE_CHECK_WHEELS (default .whl), DEVICE_CHECK_JOBS (default 6), DEVICE_CHECK_SKIP_TESTS=1 / DEVICE_CHECK_SKIP_BENCH=1,
# DEVICE_CHECK_TUNE=1 (also tune a device table, P = 2: needs the optuna wheels),
# DEVICE_CHECK_DRY_RUN=1 (a machine without GPU: environment, build and the GPU tests' skips
# only; with wheels for that machine's Python).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
LOGDIR=${OUT:-/tmp/lpmpi-device-check}
mkdir -p "$LOGDIR"
exec > >(tee -a "$LOGDIR/device_check.log") 2>&1
T0=$(date +%s)
STEP="start"
say() { echo "[device_check +$(( $(date +%s) - T0 ))s] $*"; }
trap 'rc=$?; if [ $rc -ne 0 ]; then say "FAILED in step: $STEP (exit $rc); log: $LOGDIR/device_check.log"; fi' EXIT

PY=${PYTHON:-python3}
VENV=${DEVICE_CHECK_VENV:-/tmp/lpmpi-venv}
WHEELS=${DEVICE_CHECK_WHEELS:-$ROOT/.whl}
DRY=${DEVICE_CHECK_DRY_RUN:-0}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1

STEP="machine"
say "lpmpi device check in $ROOT, logs in $LOGDIR"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv | tee "$LOGDIR/gpu.csv"
else
    say "nvidia-smi not found"
fi
command -v nvcc >/dev/null || { say "nvcc not found: cannot build the CUDA part"; exit 2; }
nvcc --version | tail -2
"$PY" --version
if [ "$DRY" = 1 ]; then
    say "dry run: no GPU expected"
else
    "$PY" -c "import cupy, numpy, Cython; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'cython', Cython.__version__); print('GPUs visible to CuPy:', cupy.cuda.runtime.getDeviceCount())"
fi
if [ -z "${LPMPI_CUDA_ARCHS:-}" ] && command -v nvidia-smi >/dev/null; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
    [ -n "$cap" ] && export LPMPI_CUDA_ARCHS=$cap
fi
say "building for CUDA architectures: ${LPMPI_CUDA_ARCHS:-80;90 (default)}"

STEP="virtual environment and wheels"
ls "$WHEELS"/*.whl >/dev/null 2>&1 || { say "no wheels in $WHEELS (see the pip download command at the top of this script)"; exit 2; }
# A venv of our own (its prefix holds MPICH's bin/, lib/ and include/, where mpi4py and
# setup.py look), seeing the machine's packages (CuPy, numpy, Cython, pytest, pip ...) through
# a .pth file, after its own: python3 there may itself be a venv, whose packages a
# --system-site-packages venv would not see.
rm -rf "$VENV"
"$PY" -m venv --without-pip "$VENV"
VPY="$VENV/bin/python"
SITE=$("$VPY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$PY" - "$SITE" <<'EOF'
import os, sys
paths = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)]
with open(os.path.join(sys.argv[1], "zz_machine_packages.pth"), "w") as f:
    f.write("\n".join(paths) + "\n")
print("machine packages seen through", paths)
EOF
timeout 180 "$VPY" -m pip install -q --no-index --no-deps --ignore-installed --no-cache-dir \
    --no-warn-script-location "$WHEELS"/*.whl
export PATH="$VENV/bin:$PATH" LD_LIBRARY_PATH="$VENV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MPICC="$VENV/bin/mpicc"
MPIEXEC="$VENV/bin/mpiexec"
[ -x "$MPIEXEC" ] && [ -x "$MPICC" ] || { say "the mpich wheel did not install mpiexec/mpicc into $VENV/bin"; exit 2; }
"$VPY" -c "import mpi4py, sys; assert mpi4py.__file__.startswith(sys.prefix), mpi4py.__file__"
"$VPY" -c "import mpi4py; from mpi4py import MPI; print('mpi4py', mpi4py.__version__, mpi4py.__file__, '|', MPI.Get_library_version().splitlines()[0])"

STEP="mpiexec smoke test"
mpi_ok() { timeout 60 "$MPIEXEC" -n 2 "$VPY" -c "from mpi4py import MPI; assert MPI.COMM_WORLD.allreduce(1) == 2" >/dev/null 2>&1; }
if ! mpi_ok; then
    for fix in "FI_PROVIDER=tcp" "FI_PROVIDER=sockets" "MPIR_CVAR_CH4_NETMOD=ucx"; do
        say "mpiexec -n 2 failed; trying $fix"
        export "${fix?}"
        if mpi_ok; then break; fi
        unset "${fix%%=*}"
    done
    mpi_ok || { say "mpiexec -n 2 does not run here"; timeout 60 "$MPIEXEC" -n 2 "$VPY" -c "from mpi4py import MPI" || true; exit 3; }
fi
say "mpiexec works"

STEP="build (nvcc)"
rm -rf build lpmpi/_core.c lpmpi/_core.*.so
LPMPI_CUDA=1 timeout 300 "$VPY" setup.py build_ext --inplace 2>&1 | grep -v -i "deprecat" | tail -25
DEVICE_CHECK_DRY_RUN=$DRY "$VPY" - <<'EOF'
import os
import lpmpi
from lpmpi import _core
info = _core.cuda_info()
print("lpmpi", lpmpi.__version__, "from", lpmpi.__file__, "cuda:", info)
assert info["built"], "lpmpi was built without CUDA"
assert info["devices"] >= 1 or os.environ["DEVICE_CHECK_DRY_RUN"] == "1", "lpmpi sees no GPU"
EOF
timeout 60 "$MPIEXEC" -n 2 "$VPY" -m lpmpi info | tee "$LOGDIR/info.txt"

TESTS_FAILED=0
if [ "${DEVICE_CHECK_SKIP_TESTS:-0}" != 1 ]; then
    STEP="GPU tests (tests/gpu, P = 1, 2, 3)"
    # in parallel where pytest-xdist is there (16 cores; the ranks share the GPU); a failure
    # here is reported at the end, after the benchmark has run too
    XDIST=()
    if "$VPY" -c "import xdist" 2>/dev/null; then XDIST=(-n "${DEVICE_CHECK_JOBS:-6}"); fi
    set +e
    timeout "${DEVICE_CHECK_TEST_TIMEOUT:-240}" "$VPY" -m pytest -q -p no:cacheprovider -rs "${XDIST[@]}" \
        tests/gpu --junitxml "$LOGDIR/gpu_tests.xml" > "$LOGDIR/gpu_tests.log" 2>&1
    rc=$?
    set -e
    tail -40 "$LOGDIR/gpu_tests.log"
    if [ $rc -ne 0 ]; then
        say "GPU tests FAILED (pytest exit $rc)"; TESTS_FAILED=1
    elif [ "$DRY" = 1 ]; then
        grep -qE "[0-9]+ skipped" "$LOGDIR/gpu_tests.log" || { say "dry run: expected the GPU tests to skip"; TESTS_FAILED=1; }
    else
        grep -q " passed" "$LOGDIR/gpu_tests.log" || { say "the GPU tests did not run"; TESTS_FAILED=1; }
        if grep -qE "[0-9]+ skipped" "$LOGDIR/gpu_tests.log"; then say "GPU tests were skipped on a GPU machine"; TESTS_FAILED=1; fi
    fi
fi

if [ "${DEVICE_CHECK_SKIP_BENCH:-0}" != 1 ] && [ "$DRY" != 1 ]; then
    STEP="benchmark (--memory cuda, P = 2)"
    timeout 150 "$MPIEXEC" -n 2 "$VPY" -m lpmpi.bench --memory cuda --collective allreduce --dtype float32 \
        --sizes 1MiB,16MiB,64MiB --algorithms lp,native,auto --min-time 0.3 --no-bandwidth \
        --json "$LOGDIR/bench_cuda.json" | tee "$LOGDIR/bench_cuda.txt"
    for chunk in 1MiB 4MiB; do
        timeout 90 "$MPIEXEC" -n 2 "$VPY" -m lpmpi.bench --memory cuda --collective allreduce --dtype float32 \
            --sizes 64MiB --algorithms lp,native --chunk-bytes "$chunk" --min-time 0.3 --no-bandwidth \
            --json "$LOGDIR/bench_cuda_chunk_$chunk.json" | tee "$LOGDIR/bench_cuda_chunk_$chunk.txt"
    done
    "$VPY" - "$LOGDIR" <<'EOF'
import glob, json, sys
rows = []
for path in sorted(glob.glob(sys.argv[1] + "/bench_cuda*.json")):
    with open(path) as f:
        doc = json.load(f)
    rows += [r for r in doc.get("rows", []) if r.get("nbytes") == 64 << 20]
best = {}
for r in rows:
    label = r.get("label") or r.get("algorithm")
    t = r.get("time_us")
    if t is not None and (label not in best or t < best[label]):
        best[label] = t
print("64 MiB float32 allreduce, P = 2, CuPy arrays (best over runs):",
      ", ".join(f"{k} {v / 1000:.2f} ms" for k, v in sorted(best.items())))
if "lp" in best and "native" in best:
    print(f"staged lp vs copy-to-host + native + copy-back: {best['native'] / best['lp']:.2f}x")
EOF
fi

if [ "${DEVICE_CHECK_TUNE:-0}" = 1 ] && [ "$DRY" != 1 ]; then
    # a device-memory tuning table for this machine (P = 2), then the benchmark with it loaded;
    # needs optuna and its requirements among the wheels
    STEP="tuning (--memory cuda, P = 2)"
    timeout "${DEVICE_CHECK_TUNE_TIMEOUT:-300}" "$MPIEXEC" -n 2 "$VPY" -m lpmpi.tune --memory cuda \
        --collectives allreduce,reduce,bcast --min-bytes 4KiB --max-bytes 64MiB --step 4 \
        --storage memory --out "$LOGDIR/mpich-P2-cuda.json" 2>&1 | tail -60 | tee "$LOGDIR/tune_cuda.txt"
    STEP="benchmark with the device table"
    LPMPI_TUNING_FILE="$LOGDIR/mpich-P2-cuda.json" timeout 150 "$MPIEXEC" -n 2 "$VPY" -m lpmpi.bench \
        --memory cuda --collective allreduce --dtype float32 --sizes 64KiB,1MiB,4MiB,16MiB,64MiB \
        --algorithms lp,be,ring,native,auto --min-time 0.2 --no-bandwidth \
        --json "$LOGDIR/bench_cuda_tuned.json" | tee "$LOGDIR/bench_cuda_tuned.txt"
fi

STEP="GPU tests (see above)"
[ "$TESTS_FAILED" = 0 ] || exit 4
STEP="done"
say "PASSED (all steps) in $(( $(date +%s) - T0 ))s"
