#!/bin/bash
# placement experiment: $1 = a (ranks on cpu0, busy cpu1) | b (rank0 cpu0, rank1+busy cpu1) | q (quiet, rank0 cpu0 rank1 cpu1)
M=/work/main/.venv/bin
case $1 in a) c0=0; c1=0; cb=1;; b) c0=0; c1=1; cb=1;; q) c0=0; c1=1; cb=;; esac
if [ -n "$cb" ]; then taskset -c $cb $M/python -c "while True: pass" & BP=$!; fi
shift
timeout 300 $M/mpiexec -n 1 taskset -c $c0 $M/python -m lpmpi.bench "$@" : -n 1 taskset -c $c1 $M/python -m lpmpi.bench "$@" 2>&1
[ -n "$cb" ] && kill $BP
