#!/bin/bash
# oneCCL 2022.2.0 (wheels oneccl-cpu, oneccl-cpu-devel and oneccl, pip install --no-deps into
# /opt/venv_ccl; oneccl-cpu installed last, so that libccl.so.1 is the CPU library and
# libccl.so.2 the oneccl wheel's) under Intel MPI's launcher, P = 2.  Compiled against the mpich
# wheel's mpi.h (Intel MPI keeps MPICH's ABI), run with Intel's libmpi and libfabric.
# Transport: CCL_ATL_TRANSPORT=ofi with libfabric's shm provider.  Not usable here: the MPI
# transport without worker threads hung in the first allgather; with CCL_WORKER_OFFLOAD=1 (either
# transport) every call took 8.0 ms (the workers need cores the two ranks occupy).  In one process
# a second collective after an allgather hung at times: one launch per collective and size.
set -u
D=$(cd "$(dirname "$0")" && pwd); CCL=/opt/venv_ccl; IMPI=/opt/venv_impi/impi; MPICH=/work/main/.venv
g++ -O2 -std=c++17 -I$CCL/include -I$MPICH/include "$D/ccl_bench.cpp" -o /tmp/w/ccl_bench \
    -L$CCL/lib -lccl -L$MPICH/lib -lmpi -Wl,-rpath,$CCL/lib 2>&1 | grep -v "may conflict"
export LD_LIBRARY_PATH=$CCL/lib:$IMPI/lib I_MPI_FABRICS=shm
export CCL_ATL_TRANSPORT=ofi FI_PROVIDER=shm CCL_ATL_SHM=1 FI_PROVIDER_PATH=$IMPI/lib
for pin in 1 0; do
  for c in allgather reduce_scatter; do
    for n in 1024 65536 1048576 4194304 16777216 67108864; do
      out=$(I_MPI_PIN=$pin timeout 60 $IMPI/bin/mpiexec -n 2 /tmp/w/ccl_bench $n 0.3 $c 2>&1 | grep -E "^$c ")
      echo "I_MPI_PIN=$pin ${out:-$c $n (no result: hung or failed)}"
    done
  done
done
