#!/bin/bash
cd /work/main
A="-b 16 -e 256M -f 4 -n 20 -w 5 -c 1"
for N in 2 4; do
  for r in 1 2 3; do
    build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf $A --host_alloc malloc > /tmp/bench/heap-np$N-r$r.txt 2>&1
    build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf $A > /tmp/bench/mem-np$N-r$r.txt 2>&1
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np $N build/perf/all_reduce_perf --baseline mpi $A > /tmp/bench/mpi-np$N-r$r.txt 2>&1
  done
  timeout 600 build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf --baseline gloo $A > /tmp/bench/gloo-np$N-r1.txt 2>&1
done
echo done > /tmp/bench/DONE
