#!/usr/bin/env bash
# Smoke test of the micro-benchmarks (build/perf/micro/braid_micro_bench): every family runs briefly and reports a
# rate: reductions per type against memcpy, shared-memory ping-pong (Simple and LL), network streams. Timings are
# not judged here (shared machines); docs/perf.md has measured figures.
# Usage: perf/tests/micro_bench_test.sh BUILD_DIR
set -u
bench=$1/perf/micro/braid_micro_bench
[ -x "$bench" ] || { echo "SKIP: $bench not built (no Google Benchmark)"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! timeout 300 "$bench" --benchmark_min_time=0.01 >"$out" 2>&1; then
  echo "FAIL: braid_micro_bench exited non-zero"
  tail -n 20 "$out"
  exit 1
fi
failures=0
for family in 'bmMemcpy ' 'bmMemcpyLarge/real_time/threads:2' 'Reduce/float/sum' 'Reduce/bfloat16/sum' \
  'Reduce/f8e4m3/max' 'PingPong/Simple/' 'PingPong/LL/' 'NetStream/Socket/'; do
  if ! grep -F -- "$family" "$out" | grep -Eq 'bytes_per_second=[0-9.]+[kMG]?/s|[0-9]+ ns'; then
    echo "FAIL: no result for $family"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || { tail -n 40 "$out"; exit 1; }
echo "micro_bench_test: all families ran ($(grep -c ' ns ' "$out") results)"
