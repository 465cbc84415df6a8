#!/bin/bash
# The evening's sweep (../../heap-2026-12-07-evening/run.sh) again with the striped kernels, without Gloo (its
# figures do not depend on braid; the evening's are in docs/perf.md). Run from the repository root.
# Optional: an output folder, and "gloo" to time Gloo once per process count after the rounds (2026-12-08's sweep).
out=${1:-docs/results/heap-2026-12-07-night/sweep}
A="-b 16 -e 256M -f 4 -n 20 -w 5 -c 1"
for N in 2 4; do
  for r in 1 2 3; do
    build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf $A --host_alloc malloc > $out/heap-np$N-r$r.txt 2>&1
    build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf $A > $out/mem-np$N-r$r.txt 2>&1
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np $N build/perf/all_reduce_perf --baseline mpi $A \
      > $out/mpi-np$N-r$r.txt 2>&1
  done
  if [ "$2" = gloo ]; then
    timeout 600 build/tools/braidrun/braidrun -np $N build/perf/all_reduce_perf --baseline gloo $A \
      > $out/gloo-np$N-r1.txt 2>&1
  fi
done
