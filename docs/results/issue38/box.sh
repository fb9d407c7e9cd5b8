# Sourced by the box scripts of this folder (run from the repository root).
# box_mpx LAYOUT [PINNED=False] [MPIEXEC]: the launcher's command line for a layout of ranks per
# node (e.g. 2,2), pinned by global rank (lpmpi.cluster's --bind) when PINNED is True.
box_mpx() {
  .venv/bin/python -c "from lpmpi import cluster; import shlex; print(shlex.join(cluster.mpiexec_command([], layout=[int(k) for k in '$1'.split(',')], bind=${2:-False}${3:+, mpiexec='$3'})))"
}
# box_pin I: launch I pinned? (the even ones)
box_pin() { [ $(($1 % 2)) -eq 0 ] && echo True || echo False; }
# box_bench MPX COLLECTIVE TIMEOUT ARGS...: one lpmpi-bench launch, "COLLECTIVE size label us" lines
box_bench() {
  local mpx=$1 coll=$2 t=$3; shift 3
  timeout "$t" $mpx .venv/bin/lpmpi-bench --collective "$coll" "$@" 2>&1 \
    | grep -E "^ +[0-9]+ +[a-z]+ " | awk -v c="$coll" '{print c, $1, $2, $3}'
}
# box_launches FN: a 4-node box at 1 Gbit/s, then per layout of $LAYOUTS (default every layout
# of issue 38) 4 fresh launches, 2 and 4 pinned, each a header line and FN LAYOUT MPX; box down
box_launches() {
  .venv/bin/python -m lpmpi.cluster up --nodes 4 --rate 1gbit > /dev/null
  local lay i pin
  for lay in ${LAYOUTS:-1,1 2,2 1,1,1 1,1,1,1 1,2,1}; do
    for i in 1 2 3 4; do
      pin=$(box_pin $i)
      echo "== layout=$lay launch=$i pinned=$pin"
      "$1" "$lay" "$(box_mpx $lay $pin)"
    done
  done
  .venv/bin/python -m lpmpi.cluster down > /dev/null
}
