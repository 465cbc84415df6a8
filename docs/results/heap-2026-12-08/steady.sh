#!/bin/bash
# Five runs of the heap all-reduce, each followed by Open MPI's in the same minutes (2 processes). Run from the
# repository root.
A="-b 64M -e 256M -f 4 -n 20 -w 5 -c 1"
show() { grep -E "^ +[0-9]" | awk -v t="$1" '{printf "%s %s oop %s ip %s wrong %s %s\n", t, $1, $8, $12, $9, $13}'; }
for i in 1 2 3 4 5; do
  build/tools/braidrun/braidrun -np 2 build/perf/all_reduce_perf $A --host_alloc malloc 2>&1 | show "run $i braid-heap"
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 build/perf/all_reduce_perf --baseline mpi $A 2>&1 \
    | show "run $i openmpi"
done
