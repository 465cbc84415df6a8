#!/usr/bin/env bash
# braid's nccl_device.h as a device-API user meets it:
#   1. every host function NVIDIA's nccl_device headers declare (the CUDA toolkit's, when present) is declared by
#      braid's; the device-side names braid does not provide yet are counted and printed, not hidden;
#   2. the headers compile as C99 and C++17 with the host compiler, and link against braid's libnccl.so.2;
#   3. with nvcc: tests/devcode/nccl_device_probe.cu (a kernel over ncclDevComm and the teams, host code asking for
#      a device communicator) compiles for sm_90 with warnings as errors, and so does tests/gpu/devapi_gpu.cu (the
#      GPU run's device-API program), linked against braid's library.
# Usage: nccl_device_header_test.sh LIBNCCL [NVCC]. Part 3 is skipped (exit 77 after parts 1-2 pass) without nvcc.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
lib=$1
nvcc=${2:-}
inc=$src/include
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

nv_dir=""
for d in /usr/local/cuda/include /usr/local/cuda-*/include; do
  [ -f "$d/nccl_device/core.h" ] && nv_dir=$d && break
done
if [ -n "$nv_dir" ]; then
  # Host functions: NCCL_EXTERN_C __host__ <type> name(
  grep -rhoE '__host__ [A-Za-z_0-9]+\*? +nccl[A-Za-z0-9_]+\(' "$nv_dir"/nccl_device "$nv_dir"/nccl_device.h \
    | sed -E 's/.* (nccl[A-Za-z0-9_]+)\($/\1/' | sort -u > "$tmp/host_names"
  missing=0
  while read -r name; do
    if ! grep -rqE "\b$name\(" "$inc"/nccl_device "$inc"/nccl_device.h; then
      echo "FAIL: NVIDIA's nccl_device declares host function $name; braid's headers do not"
      missing=1
    fi
  done < "$tmp/host_names"
  [ $missing -eq 0 ] && echo "ok   $(wc -l < "$tmp/host_names") host functions of NVIDIA's nccl_device declared"
  [ $missing -eq 0 ] || fail=1
  # Device-side names (functions and types starting ncclX) that braid's headers lack: reported.
  grep -rhoE '\bnccl[A-Z][A-Za-z0-9_]*' "$nv_dir"/nccl_device "$nv_dir"/nccl_device.h | grep -v _internal \
    | sort -u > "$tmp/all_names"
  grep -rhoE '\bnccl[A-Z][A-Za-z0-9_]*' "$inc"/nccl_device "$inc"/nccl_device.h "$inc"/nccl.h | sort -u > "$tmp/ours"
  lacking=$(comm -23 "$tmp/all_names" "$tmp/ours" | wc -l)
  echo "note: $lacking names of NVIDIA's nccl_device are not in braid's yet (the device half):" \
    "$(comm -23 "$tmp/all_names" "$tmp/ours" | head -12 | tr '\n' ' ')..."
else
  echo "note: no NVIDIA nccl_device headers found: the name check is not run"
fi

printf '#include <nccl_device.h>\nint main(void) { ncclTeam_t t = ncclTeamInnerFactor(ncclTeamWorld(0), 1);\n  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;\n  return t.nRanks == 1 && p.magic == NCCL_API_MAGIC ? 0 : 1; }\n' > "$tmp/c99.c"
if gcc -std=c99 -Wall -Wextra -Werror -DBRAID_NO_CUDA_HEADERS -I"$inc" "$tmp/c99.c" "$lib" -o "$tmp/c99" \
    > "$tmp/c99.log" 2>&1; then
  echo "ok   C99: compiles and links against $(basename "$lib")"
else
  echo "FAIL: C99 compile of nccl_device.h"; sed 's/^/    /' "$tmp/c99.log" | head -20; fail=1
fi
sed -n '/^ncclResult_t probeHost/,$p' "$src/tests/devcode/nccl_device_probe.cu" > "$tmp/host_part.cc"
printf '#include <nccl_device.h>\n' | cat - "$tmp/host_part.cc" > "$tmp/cxx.cc"
printf 'int main() { ncclDevComm dc{}; dc.nRanks = dc.lsaSize = 1; return ncclTeamRail(dc).nRanks == 1 ? 0 : 1; }\n' \
  >> "$tmp/cxx.cc"
if g++ -std=c++17 -Wall -Wextra -Werror -DBRAID_NO_CUDA_HEADERS -I"$inc" "$tmp/cxx.cc" "$lib" -o "$tmp/cxx" \
    > "$tmp/cxx.log" 2>&1 && LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/cxx"; then
  echo "ok   C++17: compiles, links and runs"
else
  echo "FAIL: C++17 compile, link or run of nccl_device.h"; sed 's/^/    /' "$tmp/cxx.log" | head -20; fail=1
fi

if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then nvcc=$(command -v nvcc || true); fi
if [ -z "$nvcc" ]; then
  [ $fail -eq 0 ] || exit 1
  echo "SKIP: nvcc not found: the device compile of nccl_device.h is not checked"
  exit 77
fi
if "$nvcc" -x cu -arch=sm_90 -std=c++17 -Werror all-warnings -I"$inc" -c "$src/tests/devcode/nccl_device_probe.cu" \
    -o "$tmp/probe.o" > "$tmp/nvcc.log" 2>&1; then
  echo "ok   nvcc sm_90: nccl_device_probe.cu"
else
  echo "FAIL: nvcc of nccl_device_probe.cu"; sed 's/^/    /' "$tmp/nvcc.log" | head -30; fail=1
fi
# The same for sm_100a, where the switch has fp8 sums (multimem.ld_reduce ... e4m3x4 / e5m2x4): ptxas checks them.
if "$nvcc" -x cu -arch=sm_100a -std=c++17 -Werror all-warnings -I"$inc" -c "$src/tests/devcode/nccl_device_probe.cu" \
    -o "$tmp/probe100.o" > "$tmp/nvcc100.log" 2>&1; then
  echo "ok   nvcc sm_100a: nccl_device_probe.cu (fp8 multimem)"
else
  echo "FAIL: nvcc sm_100a of nccl_device_probe.cu"; sed 's/^/    /' "$tmp/nvcc100.log" | head -30; fail=1
fi
# The GPU run's device-API program (tests/gpu/run.sh runs it where there is a GPU): compiles and links here.
if "$nvcc" -std=c++17 -arch=sm_90 -Werror all-warnings -I"$inc" "$src/tests/gpu/devapi_gpu.cu" -Xlinker "$lib" \
    -o "$tmp/devapi_gpu" > "$tmp/gpu.log" 2>&1; then
  echo "ok   nvcc sm_90: tests/gpu/devapi_gpu.cu compiles and links"
else
  echo "FAIL: nvcc of tests/gpu/devapi_gpu.cu"; sed 's/^/    /' "$tmp/gpu.log" | head -30; fail=1
fi
exit $fail
