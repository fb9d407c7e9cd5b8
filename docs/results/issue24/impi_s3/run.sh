export I_MPI_FABRICS=shm LD_LIBRARY_PATH=/opt/venv_impi/impi/lib MPI4PY_LIBMPI=/opt/venv_impi/impi/lib/libmpi.so.12
for r in 1 2 3; do
 for cfg in "8 256K" "8 1M" "8 4M" "13 1M"; do set -- $cfg
  echo "=== round $r ADJ=$1 chunk=$2"
  I_MPI_ADJUST_ALLREDUCE=$1 timeout 200 /opt/venv_impi/impi/bin/mpiexec -n 2 /opt/venv_impi/bin/python -m lpmpi.bench --sizes 4M,16M --algorithms auto,mpi4py,lp,ring,be --chunk-bytes $2 --no-bandwidth 2>&1 | grep -E "^\s+[0-9]+ "
 done
done
