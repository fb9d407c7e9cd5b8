#!/bin/bash
# A/B launches: ab.sh "SIZES" ROUNDS "PINFLAG" BUSY(0/1) CONFIG... ; CONFIG = label,pythonpath,ENV=V;ENV=V,alg
export PATH=/work/main/.venv/bin:$PATH MPIR_CVAR_CH4_PROGRESS_THROTTLE=1
sizes=$1; rounds=$2; pin=$3; busy=$4; shift 4
for r in $(seq $rounds); do for nb in $sizes; do
  [ "$busy" = 1 ] && { python -c "while 1: pass" & B=$!; }
  reps=$(( nb > 8000000 ? 10 : nb > 500000 ? 100 : 1000 )); cb=$(( nb >= 1048576 ? 1048576 : 65536 ))
  for cfg in "$@"; do IFS=, read -r label pp envs alg <<< "$cfg"
    out=$(env PYTHONPATH=$pp ${envs//;/ } timeout 120 mpiexec $pin -n 2 python /tmp/w/t64.py $nb ${alg:-ring} $cb $reps)
    echo "r$r pin=${pin:-no} busy=$busy $nb $label: $(echo $out | sed 's/.*med=/med=/')"
  done
  [ "$busy" = 1 ] && kill $B
done; done
