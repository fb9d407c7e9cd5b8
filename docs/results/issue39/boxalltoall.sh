#!/usr/bin/env bash
# Issue 39: alltoall in the cluster box (lpmpi.cluster: 4 namespaced nodes, 1 Gbit/s NICs), from
# 64 KiB per block; layouts 1,1 (2 nodes, 1 rank each), 2,2 and 1,1,1,1; 4 fresh launches each,
# 2 pinned (by global rank); every algorithm against MPICH's own (native; mpi4py's call too).
#   bash docs/results/issue39/boxalltoall.sh > docs/results/issue39/boxalltoall_epyc.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
. docs/results/issue38/box.sh
one() {   # LAYOUT MPX: sizes are the P blocks' bytes, so 64 KiB per block at P ranks is P x 64 KiB
  local P=$(( $(echo "$1" | tr ',' '+') ))
  box_bench "$2" alltoall 900 --sizes $((P * 65536)),$((P * 1048576)),$((P * 4194304)) \
    --algorithms pairwise,native,auto,mpi4py --no-check --no-bandwidth --min-time 0.3
}
LAYOUTS=${LAYOUTS:-"1,1 2,2 1,1,1,1"} box_launches one
