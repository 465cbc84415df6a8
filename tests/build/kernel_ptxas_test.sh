#!/usr/bin/env bash
# ptxas's resource report for braid's kernels (CMakeLists.txt writes it while building the fatbin): every entry of
# kKernelNames and kDirectKernelName (src/backends/common/kernel_main.h) was compiled for sm_90, spills nothing, and fits its launch bound
# (kKernelMaxThreads threads with one CTA per SM: 65536 / 512 = 128 registers a thread). Skipped (77) in a build
# without nvcc, which has no report.
set -euo pipefail
log=${1:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "$log" ] || [ ! -f "$log" ]; then
  echo "SKIP: no ptxas report (${log:-none}): this build has no fatbin"
  exit 77
fi
header=$src/src/backends/common/kernel_main.h
names=$(grep -o 'kKernelNames\[3\] = {[^}]*}' "$header" | grep -o '"[A-Za-z0-9]*"' | tr -d '"')
names="$names $(grep -o 'kDirectKernelName = "[A-Za-z0-9]*"' "$header" | grep -o '"[A-Za-z0-9]*"' | tr -d '"')"
threads=$(grep -o 'kKernelMaxThreads = [0-9]*' "$header" | grep -o '[0-9]*$')
maxregs=$((65536 / threads))
[ "$maxregs" -gt 255 ] && maxregs=255
fail=0
[ -n "$names" ] || { echo "FAIL: no kernel names found in $header"; exit 1; }
for k in $names; do
  block=$(awk -v k="$k" '
    index($0, "Compiling entry function '\''" k "'\'' for '\''sm_90'\''") { on = 1; next }
    on && /Compiling entry function/ { exit }
    on { print }' "$log")
  if [ -z "$block" ]; then
    echo "FAIL $k: not in the ptxas report (was it renamed? kernel_main.h and braid_kernel.cu must agree)"
    fail=1
    continue
  fi
  regs=$(echo "$block" | grep -o 'Used [0-9]* registers' | grep -o '[0-9]*' | head -1)
  stores=$(echo "$block" | grep -o '[0-9]* bytes spill stores' | grep -o '^[0-9]*' | head -1)
  loads=$(echo "$block" | grep -o '[0-9]* bytes spill loads' | grep -o '^[0-9]*' | head -1)
  stack=$(echo "$block" | grep -o '[0-9]* bytes stack frame' | grep -o '^[0-9]*' | head -1)
  msg="$k: $regs registers (limit $maxregs), spills ${stores:-?}/${loads:-?} bytes, stack ${stack:-?} bytes"
  if [ -z "$regs" ] || [ "$regs" -gt "$maxregs" ] || [ "${stores:-1}" != 0 ] || [ "${loads:-1}" != 0 ]; then
    echo "FAIL $msg"
    fail=1
  else
    echo "ok   $msg"
  fi
done
exit $fail
