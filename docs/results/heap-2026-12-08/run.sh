#!/bin/bash
# The sweep of docs/results/heap-2026-12-07-evening/run.sh at HEAD (striped loops, pieced reducing
# steps), 3 rounds of braid heap, braid ncclMemAlloc and Open MPI per process count, then Gloo once. Run from the
# repository root.
out=docs/results/heap-2026-12-08
A="-b 16 -e 256M -f 4 -n 20 -w 5 -c 1"
for N in 2 4; do
  for r in 1 2 3; do
    build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf $A --host_alloc malloc > $out/heap-np$N-r$r.txt 2>&1
    build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf $A > $out/mem-np$N-r$r.txt 2>&1
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np $N build/perf/all_reduce_perf --baseline mpi $A \
      > $out/mpi-np$N-r$r.txt 2>&1
  done
  timeout 600 build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf --baseline gloo $A \
    > $out/gloo-np$N-r1.txt 2>&1
done
