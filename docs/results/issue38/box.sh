# Sourced by the box scripts of this folder (run from the repository root).
# box_mpx LAYOUT [PINNED=False] [MPIEXEC]: the launcher's command line for a layout of ranks per
# node (e.g. 2,2), pinned by global rank (lpmpi.cluster's --bind) when PINNED is True.
box_mpx() {
  .venv/bin/python -c "from lpmpi import cluster; import shlex; print(shlex.join(cluster.mpiexec_command([], layout=[int(k) for k in '$1'.split(',')], bind=${2:-False}${3:+, mpiexec='$3'})))"
}
# box_pin I: launch I pinned? (the even ones)
box_pin() { [ $(($1 % 2)) -eq 0 ] && echo True || echo False; }
