#!/bin/bash
# braid heap (--host_alloc malloc), braid ncclMemAlloc (-R 1), Open MPI, Gloo; 2 and 4 processes; 3 rounds, the
# libraries alternating in each round. Prints: np lib run tool bytes time_us busbw_GBps (out of place).
cd /work/main
run_one() {  # np lib tool sizes
  local np=$1 lib=$2 tool=$3 sizes=$4 cmd
  case $lib in
    heap) cmd="build/tools/braidrun/braidrun -np $np build/perf/$tool $sizes --host_alloc malloc -n 20 -w 5";;
    memalloc) cmd="build/tools/braidrun/braidrun -np $np build/perf/$tool $sizes -R 1 -n 20 -w 5";;
    mpi) cmd="mpirun --allow-run-as-root --oversubscribe -np $np build/perf/$tool --baseline mpi $sizes -n 20 -w 5";;
    gloo) cmd="build/tools/braidrun/braidrun -np $np build/perf/$tool --baseline gloo $sizes -n 5 -w 2";;
  esac
  $cmd 2>&1 | grep -E "^\s+[0-9]+ " | awk -v np=$np -v lib=$lib -v run=$run -v tool=${tool%_perf} '{print np, lib, run, tool, $1, $6, $8}'
}
for np in 2 4; do
  for run in 1 2 3; do
    for lib in heap memalloc mpi gloo; do run_one $np $lib all_reduce_perf "-b 16 -e 256M -f 4"; done
    for tool in reduce_scatter_perf all_gather_perf broadcast_perf; do
      for lib in heap mpi; do run_one $np $lib $tool "-b 64M -e 256M -f 4"; done
    done
  done
done
