#!/usr/bin/env bash
# Installs braid into a temporary prefix, then builds and runs a consumer with pkg-config and with CMake's
# find_package(braid): both must load the installed libnccl.so.2.
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cat > "$work/consumer.c" <<'C'
#include <nccl.h>
#include <stdio.h>
int main(void) {
  int v = 0;
  ncclComm_t c[1];
  float x[2] = {1, 2};
  if (ncclGetVersion(&v) != ncclSuccess || v != NCCL_VERSION_CODE) return 1;
  if (ncclCommInitAll(c, 1, NULL) != ncclSuccess) return 2;
  if (ncclAllReduce(x, x, 2, ncclFloat, ncclSum, c[0], NULL) != ncclSuccess || x[1] != 2) return 3;
  ncclCommDestroy(c[0]);
  printf("consumer ok\n");
  return 0;
}
C
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib64/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
cc -std=c99 -DBRAID_NO_CUDA_HEADERS "$work/consumer.c" $(pkg-config --cflags --libs nccl) -o "$work/pc_consumer"
"$work/pc_consumer"
# Capture first: with pipefail, `ldd | grep -q` fails whenever grep exits early and ldd gets SIGPIPE.
libs=$(ldd "$work/pc_consumer")
grep -qF "$prefix" <<<"$libs" || { echo "pkg-config consumer did not load the installed library"; exit 1; }
mkdir -p "$work/cm"
cat > "$work/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(consumer C)
find_package(braid REQUIRED)
add_executable(consumer ../consumer.c)
target_compile_definitions(consumer PRIVATE BRAID_NO_CUDA_HEADERS)
target_link_libraries(consumer PRIVATE braid::nccl)
CM
cmake -S "$work/cm" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cm/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64:$prefix/lib/x86_64-linux-gnu" "$work/cm/build/consumer"
