#!/bin/bash
# Old and new libnccl.so.2 alternating on the same all_reduce_perf binary (run from the repository root, after
# copying each build's build/libnccl.so.2.32.3 to /tmp/ab/<name>/libnccl.so.2). Prints, per run, size:oop/ip busbw.
# usage: ab.sh ROUNDS NP all_reduce_perf-args...   (VARS="old new" names the library folders)
R=$1; NP=$2; shift 2
for r in $(seq "$R"); do for v in ${VARS:-old new}; do
  echo -n "$v: "
  LD_LIBRARY_PATH=/tmp/ab/$v build/tools/braidrun/braidrun -np "$NP" env LD_LIBRARY_PATH=/tmp/ab/$v \
    build/perf/${TOOL:-all_reduce_perf} "$@" 2>&1 | grep -E "^ +[0-9]" | awk '{printf "%s:%s/%s  ", $1, $8, $12}'
  echo
done; done
