#!/bin/bash
# Issue 38: MPICH's best configuration in the box: its allreduce algorithms forced by CVAR
# (MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM, with MPIR_CVAR_DEVICE_COLLECTIVES=none so that the
# choice is not overridden by the device layer), one launch each, 1 and 16 MiB, against lpmpi's
# auto in the same launch; 1 Gbit/s.
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
.venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
for lay in 2,2 1,1,1 1,1,1,1 1,2,1; do
  mpx=$(box_mpx $lay)
  for alg in default recursive_doubling reduce_scatter_allgather ring tree recexch_single_buffer k_reduce_scatter_allgather; do
    env=""; [ $alg != default ] && env="-genv MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM $alg -genv MPIR_CVAR_DEVICE_COLLECTIVES none"
    echo "== layout=$lay mpich=$alg"
    timeout 600 $mpx $env .venv/bin/lpmpi-bench --collective allreduce --sizes 1M,16M --algorithms native,auto \
      --min-time 0.3 --reps 3 --warmup 1 2>&1 | grep -E "^ +[0-9]+ +[a-z]+ " | awk '{print "allreduce", $1, $2, $3}'
  done
done
.venv/bin/python -m lpmpi.cluster down > /dev/null
