#!/bin/bash
# After the VM has been idle 90 s, the first timed sizes of a run: braid heap with the default 5 warm-up iterations
# and with 60, braid ncclMemAlloc and Open MPI with 5. Run from the repository root.
A="-b 64M -e 256M -f 4 -n 20 -c 1"
show() { grep -E "^ +[0-9]" | awk -v t="$1" '{printf "%s %s oop %s ip %s wrong %s %s\n", t, $1, $8, $12, $9, $13}'; }
for trial in 1 2; do
  sleep 90; build/tools/braidrun/braidrun -np 2 build/perf/all_reduce_perf $A -w 60 --host_alloc malloc 2>&1 | show "heap-w60"
  sleep 90; build/tools/braidrun/braidrun -np 2 build/perf/all_reduce_perf $A -w 5 --host_alloc malloc 2>&1 | show "heap-w5"
  sleep 90; mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 build/perf/all_reduce_perf --baseline mpi $A -w 5 \
    2>&1 | show "mpi-w5"
  sleep 90; build/tools/braidrun/braidrun -np 2 build/perf/all_reduce_perf $A -w 5 2>&1 | show "mem-w5"
done
