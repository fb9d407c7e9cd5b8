#!/bin/bash
# per-call Ir in lpmpi's extension: (Ir(N2) - Ir(N1)) / (N2 - N1), P = 1, 8 B allreduce
PY=/work/main/.venv/bin/python
for tree in base new; do
  [ $tree = base ] && PP=/tmp/base || PP=/work/main
  for alg in lp native; do
    for n in 1000 3000; do
      rm -f cg.out
      (cd /tmp && PYTHONPATH=$PP LPMPI_TUNING_FILE=none timeout 600 valgrind --tool=callgrind --callgrind-out-file=$OLDPWD/cg.out $PY $(dirname "$0")/percall.py $n $alg >/dev/null 2>&1)
      ir=$(callgrind_annotate --inclusive=no cg.out 2>/dev/null | grep "_core.cpython" | awk '{gsub(",","",$1); s+=$1} END {print s}')
      echo "$tree $alg $n $ir"
    done
  done
done
