#!/usr/bin/env bash
# libnccl.so.2 links neither the CUDA driver nor the runtime (issue 15: the driver is dlopen()ed at run time,
# BRAID_CUDA_DRIVER, and the runtime is never used): no NEEDED entry for libcuda or libcudart, and no undefined cu* or
# cuda* symbol, so a host-only program loads it on a machine without CUDA.
# Usage: no_cuda_needed.sh <libnccl.so.2>
set -euo pipefail
lib=$1
fail=0
needed=$(readelf -d "$lib" | awk '/\(NEEDED\)/ {print $NF}')
echo "NEEDED: $(echo $needed)"
if echo "$needed" | grep -E 'libcuda|libcudart|libnvidia'; then
  echo "FAIL: $lib needs a CUDA library at load time"
  fail=1
fi
undef=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | grep -E '^(cu|cuda)[A-Z]' || true)
if [ -n "$undef" ]; then
  echo "FAIL: undefined CUDA symbols in $lib: $(echo $undef)"
  fail=1
fi
[ "$fail" -eq 0 ] && echo "ok: $lib needs no CUDA library"
exit "$fail"
