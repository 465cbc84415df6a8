#!/usr/bin/env bash
# clang builds braid (sanitizer and fuzzing builds use clang): the library, its tools and the unit tests, configured
# afresh with clang++ in BUILD_DIR/clang, then the unit tests' reduction and schedule suites run from that build.
# It is also the build without the CUDA toolkit (BRAID_WITH_CUDA=OFF: no nvcc, no fatbin, the kernels only as the
# emulator's image), which must keep working.
# Usage: tests/build/clang_build_test.sh BUILD_DIR SOURCE_DIR. Skipped (77) when clang++ is not installed.
set -euo pipefail
build=$1
src=$2
cxx=$(command -v clang++ || command -v clang++-14 || true)
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cxx" ] || [ -z "$cc" ]; then
  echo "SKIP: clang++ not installed (scripts/setup.sh installs it)"
  exit 77
fi
out=$build/clang
# -O1: fast to build, and still inlines enough for the always_inline element functions.
cmake -S "$src" -B "$out" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g0" -DBRAID_BUILD_BENCHMARKS=OFF -DBRAID_WITH_GLOO=OFF -DBRAID_WITH_MPI=OFF \
  -DBRAID_WITH_CUDA=OFF \
  >"$out.configure.log" 2>&1 || { cat "$out.configure.log"; exit 1; }
if ! cmake --build "$out" -j2 --target nccl braid-info braidrun braid_unit_tests >"$out.build.log" 2>&1; then
  grep -E "error|Error" "$out.build.log" | head -40
  echo "FAIL: clang build (log: $out.build.log)"
  exit 1
fi
if grep -q "braid_kernels_fatbin" "$out.build.log"; then
  echo "FAIL: the build without the CUDA toolkit built the fatbin"
  exit 1
fi
"$out/tests/braid_unit_tests" --gtest_filter='Reduce*:StepEngine*:StepShape*:Schedule*:Ll*' --gtest_brief=1
echo "clang build without the CUDA toolkit: $("$cxx" --version | head -1): library, tools and unit tests built;" \
  "reduction and schedule suites pass"
