#!/bin/bash
# instructions per 8 B allreduce at P = 1, (5000 calls - 1000 calls) / 4000, fixed PYTHONHASHSEED
M=/work/main; B=/tmp/wt_0844; OUT=${OUT:-/tmp/w/cg_s4}; mkdir -p $OUT
for seed in 1 2; do
  for b in base new; do
    d=$M; [ $b = base ] && d=$B
    for n in 1000 5000; do
      PYTHONHASHSEED=$seed OPENBLAS_NUM_THREADS=1 PYTHONPATH=$d valgrind --tool=callgrind --callgrind-out-file=$OUT/$b.$seed.$n.out \
        $M/.venv/bin/python $M/docs/results/issue26/callgrind_cg.py $n > /dev/null 2> $OUT/$b.$seed.$n.err
    done
    a=$(grep -m1 "Collected" $OUT/$b.$seed.1000.err | awk '{print $NF}'); c=$(grep -m1 "Collected" $OUT/$b.$seed.5000.err | awk '{print $NF}')
    echo "seed $seed $b per call: $(( (c - a) / 4000 ))"
  done
done
