#!/usr/bin/env bash
# Fuzzing in CI: builds every libFuzzer target (tests/fuzz/CMakeLists.txt) with clang, AddressSanitizer and
# libFuzzer's coverage on the library too, in BUILD_DIR/fuzz, and runs each for SECONDS (default 25) from a copy of
# its committed corpus. Fails on any crash, leak, timeout (10 s per input) or out-of-memory; prints executions per
# target. Usage: tests/fuzz/run_fuzzers.sh BUILD_DIR SOURCE_DIR [SECONDS]. Skipped (77) without clang or libFuzzer
# (Debian: clang and libclang-rt-14-dev, which scripts/setup.sh installs).
set -euo pipefail
build=$1
src=$2
secs=${3:-25}
cxx=$(command -v clang++ || command -v clang++-14 || true)
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cxx" ] || [ -z "$cc" ]; then
  echo "SKIP: clang++ not installed (scripts/setup.sh installs it)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cc"
if ! "$cxx" -fsanitize=fuzzer,address "$probe/p.cc" -o "$probe/p" 2> "$probe/err"; then
  echo "SKIP: $cxx cannot link libFuzzer ($(head -1 "$probe/err")); install libclang-rt-14-dev"
  exit 77
fi
out=$build/fuzz
targets=(topo_xml tuning algo_filter trainer_json unique_id bootstrap_wire connect_blob)
cmake -S "$src" -B "$out" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g0" -DCMAKE_C_FLAGS_DEBUG="-O1 -g0" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address" -DCMAKE_C_FLAGS="-fsanitize=address" \
  -DBRAID_FUZZ=ON -DBRAID_BUILD_BENCHMARKS=OFF -DBRAID_WITH_GLOO=OFF -DBRAID_WITH_MPI=OFF \
  > "$out.configure.log" 2>&1 || { cat "$out.configure.log"; exit 1; }
names=()
for t in "${targets[@]}"; do names+=("braid_${t}_fuzz"); done
if ! cmake --build "$out" -j2 --target "${names[@]}" > "$out.build.log" 2>&1; then
  grep -E "error|Error" "$out.build.log" | head -40
  echo "FAIL: fuzz build (log: $out.build.log)"
  exit 1
fi
failed=0
for t in "${targets[@]}"; do
  corpus=$out/corpus/$t
  mkdir -p "$corpus"
  if [ "$t" = topo_xml ]; then
    cp "$src"/tests/fixtures/fuzz_corpus/* "$src"/tests/fixtures/topo/*.xml "$corpus"/ 2> /dev/null || true
  else
    cp "$src"/tests/fixtures/fuzz/"$t"/* "$corpus"/
  fi
  extra=()
  [ -f "$src/tests/fuzz/$t.dict" ] && extra+=("-dict=$src/tests/fuzz/$t.dict")
  log=$out/$t.log
  if "$out/tests/fuzz/braid_${t}_fuzz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
      -print_final_stats=1 -artifact_prefix="$out/$t-" "${extra[@]}" "$corpus" > "$log" 2>&1; then
    execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
    echo "fuzz $t: $execs executions in ${secs} s, no crash (corpus $(ls "$corpus" | wc -l) inputs)"
  else
    echo "FAIL: fuzz $t (log $log):"
    grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$log" | head -20
    failed=1
  fi
done
exit $failed
