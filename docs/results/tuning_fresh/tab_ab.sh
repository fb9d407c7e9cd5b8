#!/bin/bash
# tab_ab.sh LIB OLD NEW ROUNDS COLL SIZES: auto with LPMPI_TUNING_FILE alternated, fresh (blocking,inplace) and plain
lib=$1; old=$2; new=$3; R=$4; coll=$5; S=$6
cd /tmp
case $lib in
  mpich) L="env /opt/venv/bin/mpiexec -n 2"; PY=/opt/venv/bin/python;;
  ompi) L="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /opt/venv_ompi/bin/mpiexec -x LPMPI_TUNING_FILE -n 2"; PY=/opt/venv_ompi/bin/python;;
  impi) L="env /opt/venv_impi/impi/bin/mpiexec -genv I_MPI_FABRICS=shm -genv LD_LIBRARY_PATH=/opt/venv_impi/impi/lib -genv MPI4PY_LIBMPI=/opt/venv_impi/impi/lib/libmpi.so.12 -n 2"; PY=/opt/venv_impi/bin/python;;
esac
for i in $(seq $R); do for T in old new; do
  F=$old; [ $T = new ] && F=$new
  LPMPI_TUNING_FILE=$F $L $PY -m lpmpi.bench --collective $coll --forms blocking,inplace --fresh-input --algorithms auto --sizes $S --no-bandwidth 2>&1 | awk -v t=$T '$2 ~ /^auto/ {print "fresh", t, $1, $2, $3}'
  LPMPI_TUNING_FILE=$F $L $PY -m lpmpi.bench --collective $coll --algorithms auto --sizes $S --no-bandwidth 2>&1 | awk -v t=$T '$2=="auto"{print "plain", t, $1, $2, $3}'
done; done
