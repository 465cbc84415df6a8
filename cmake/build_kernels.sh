#!/bin/sh
# nvcc for braid's kernels (CMakeLists.txt): nvcc, source root, output fatbin, ptxas report. On failure the report
# (which then holds the compiler's errors) is printed.
nvcc=$1 src=$2 out=$3 log=$4
if ! "$nvcc" -x cu -std=c++17 --fmad=false -fatbin "-gencode=arch=compute_90,code=[sm_90,compute_90]" -Xptxas -v \
  -I"$src" -o "$out" "$src/src/backends/cuda/kernels/braid_kernel.cu" 2>"$log"; then
  cat "$log"
  exit 1
fi
