#!/bin/bash
# Session 4 measurements of issue 26, one after the other (never two at once: 2 vCPUs).
# AMD EPYC (family 25 model 17), 2 vCPUs under KVM; MPICH 5.0.2, Open MPI 5.0.11, Intel MPI 2021.18.
set -u
M=/work/main; R=$M/docs/results/issue26/s4; PY=$M/.venv/bin/python
unset MPIR_CVAR_CH4_PROGRESS_THROTTLE
export PYTHONPATH=$M
step() { echo "### $(date +%T) $*"; }
step "A/B and callgrind"
OUT=/tmp/w/ab_s4 bash $R/ab.sh && $PY $R/ab_summary.py /tmp/w/ab_s4 > $R/ab_summary.txt; cp /tmp/w/ab_s4/*.log $R/
OUT=/tmp/w/cg_s4 bash $R/callgrind.sh > $R/callgrind.txt 2>&1
for c in allgather reduce_scatter; do
  step "MPICH launches $c"
  $PY -m lpmpi.bench.launches --launches 8 -n 2 --json $R/${c}_auto.json -- --collective $c \
      --sizes 1K,64K,1M,4M,16M,64M --algorithms auto,native --no-bandwidth > $R/${c}_auto.txt 2>&1
  step "bound $c"
  $PY -m lpmpi.bench.launches --launches 2 -n 2 -- --collective $c --sizes 16M,64M \
      --algorithms auto,lp,ring,be,native > $R/${c}_bound.txt 2>&1
  step "gloo $c"
  $PY -m lpmpi.bench.launches --launches 4 -n 2 --env MASTER_ADDR=127.0.0.1 --env GLOO_SOCKET_IFNAME=lo \
      --json $R/${c}_gloo.json -- --collective $c --sizes 64K,1M,16M,64M --algorithms auto,native \
      --peers --no-bandwidth > $R/${c}_gloo.txt 2>&1
done
step "sweeps"
for c in allgather reduce_scatter; do
  $PY $M/tools/native_sweep.py --library mpich --collective $c --python $PY --mpiexec $M/.venv/bin/mpiexec \
      --sizes 64K,1M,16M,64M --rounds 2 --out $R/sweep_mpich_$c.json > $R/sweep_mpich_$c.txt 2>&1
  env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH= $PY $M/tools/native_sweep.py \
      --library ompi --collective $c --python /opt/venv_ompi/bin/python --mpiexec /opt/venv_ompi/bin/mpiexec \
      --mpiexec-args "--oversubscribe" --sizes 64K,1M,16M,64M --rounds 2 \
      --out $R/sweep_ompi_$c.json > $R/sweep_ompi_$c.txt 2>&1
  env I_MPI_FABRICS=shm LD_LIBRARY_PATH=/opt/venv_impi/impi/lib MPI4PY_LIBMPI=/opt/venv_impi/impi/lib/libmpi.so.12 \
      PYTHONPATH= $PY $M/tools/native_sweep.py --library impi --collective $c --python /opt/venv_impi/bin/python \
      --mpiexec /opt/venv_impi/impi/bin/mpiexec --sizes 64K,1M,16M,64M --rounds 2 \
      --out $R/sweep_impi_$c.json > $R/sweep_impi_$c.txt 2>&1
done
step done
