#!/bin/bash
# issue 25's reproducers under Open MPI and Intel MPI (installed lpmpi of each venv)
cd /tmp/w
for lib in ompi impi; do
  if [ $lib = ompi ]; then
    PY=/opt/venv_ompi/bin/python; MX="/opt/venv_ompi/bin/mpiexec --oversubscribe"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
    envf() { echo "-x $1=$2"; }
  else
    PY=/opt/venv_impi/bin/python; MX=/opt/venv_impi/impi/bin/mpiexec
    export I_MPI_FABRICS=shm LD_LIBRARY_PATH=/opt/venv_impi/impi/lib MPI4PY_LIBMPI=/opt/venv_impi/impi/lib/libmpi.so.12
    envf() { echo "-env $1 $2"; }
  fi
  echo "== $lib: 1 persistent start order, LPMPI_CHECK=1"
  LPMPI_CHECK=1 timeout 60 $MX -n 2 $PY t1.py 2>&1 | grep -E "^[01] " | cut -c1-120
  echo "== $lib: 3 LPMPI_CHUNK_BYTES on rank 0 only"
  timeout 60 $MX -n 1 $(envf LPMPI_CHUNK_BYTES 8K) $PY t3.py : -n 1 $PY t3.py 2>&1 | grep -E "^[01] " | cut -c1-160
  for n in 2 3; do
    echo "== $lib: 7 emulated staging matrix P=$n"
    LPMPI_EMULATE_STAGING=1 timeout 120 $MX -n $n $PY t7b.py 2>&1 | grep -c "^OK"
  done
  for a in "cold 1000 auto" "warm 1000000 lp" "warm 1000000 native"; do
    echo "== $lib: 8 LPMPI_TIMEOUT=3 $a"
    LPMPI_TIMEOUT=3 timeout 60 $MX -n 2 $PY t8.py $a 2>&1 | grep -E "^0 " | cut -c1-140
  done
  echo "== $lib: 6 fork (cma, progress thread)"
  LPMPI_NODE_TRANSPORT=cma LPMPI_PROGRESS_THREAD=1 timeout 60 $MX -n 2 $PY t6.py 2>&1 | grep -E "child exited" | cut -c1-100
done
