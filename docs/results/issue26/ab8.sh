M=/work/main; OUT=/tmp/w/ab8; mkdir -p $OUT; rm -f $OUT/*.log
for i in 1 2 3 4 5 6; do
  for pin in "" "-bind-to core"; do
    for b in new base; do
      d=$M; [ $b = base ] && d=/tmp/w/base
      echo "=== $b round $i pin=[$pin]" >> $OUT/$b.log
      PYTHONPATH=$d timeout 300 $M/.venv/bin/mpiexec $pin -n 2 $M/.venv/bin/python -m lpmpi.bench --sizes 8,64 --algorithms auto,native,mst --no-bandwidth --min-time 1 >> $OUT/$b.log 2>&1
    done
  done
done
