#!/usr/bin/env bash
# Smoke test of the perf tools: all_reduce_perf as one process, as 2 threads, under braidrun -np 4, and every
# datatype x op with 3 threads. Each run must exit 0, print one table with the expected number of data rows, have 0
# in every #wrong column, and end with nccl-tests' footer.
#
# Usage: perf/tests/perf_smoke.sh BUILD_DIR
set -u

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$1

find_tool() {  # find_tool NAME CANDIDATE...
  local name=$1
  shift
  for c in "$@"; do
    if [ -x "$c" ]; then
      echo "$c"
      return 0
    fi
  done
  find "$build" -type f -name "$name" -perm -u+x 2>/dev/null | head -n 1
}
perf=$(find_tool all_reduce_perf "$build/perf/all_reduce_perf" "$build/all_reduce_perf")
braidrun=$(find_tool braidrun "$build/tools/braidrun/braidrun" "$build/braidrun")
if [ -z "$perf" ] || [ -z "$braidrun" ]; then
  echo "FAIL: all_reduce_perf or braidrun not found under $build" >&2
  exit 1
fi

timeout_s=${PERF_SMOKE_TIMEOUT:-180}
failures=0
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# rows_for MIN MAX FACTOR: how many sizes the sweep visits.
rows_for() {
  local s=$1 n=0
  while [ "$s" -le "$2" ]; do
    n=$((n + 1))
    s=$((s * $3))
  done
  echo "$n"
}

# check NAME EXPECTED_ROWS COMMAND...
check() {
  local name=$1 expected=$2
  shift 2
  echo "== $name: $*"
  timeout "$timeout_s" "$@" >"$out" 2>"$err"
  local rc=$?
  local problems
  problems=$(awk -v expected="$expected" '
    /^#/ {
      if ($0 ~ /^# Out of bounds values : 0 OK$/) footer_ok = 1
      if ($0 ~ /^# Collective test concluded: all_reduce_perf$/) concluded = 1
      if ($0 ~ /^# Collective test starting:/) headers++
      next
    }
    NF == 13 && $1 ~ /^[0-9]+$/ {
      rows++
      if ($9 != "0" || $13 != "0") wrong++
      next
    }
    { other++ }
    END {
      if (rows != expected) printf "expected %d data rows, got %d; ", expected, rows
      if (wrong) printf "%d rows with #wrong != 0; ", wrong
      if (!footer_ok) printf "no \"# Out of bounds values : 0 OK\"; "
      if (!concluded) printf "no \"# Collective test concluded\"; "
      if (headers != 1) printf "%d table headers (want 1); ", headers
      if (other) printf "%d unexpected output lines; ", other
    }' "$out")
  if [ "$rc" -ne 0 ] || [ -n "$problems" ]; then
    echo "FAIL: $name: exit status $rc; $problems"
    sed 's/^/    out: /' "$out"
    sed 's/^/    err: /' "$err"
    failures=$((failures + 1))
  else
    echo "ok: $name ($expected rows)"
  fi
}

args=(-b 8 -e 1M -f 4 -c 1 -n 2 -w 1)
rows=$(rows_for 8 1048576 4)
check "1 process" "$rows" "$perf" "${args[@]}"
check "1 process, -t 2" "$rows" "$perf" "${args[@]}" -t 2
check "braidrun -np 4" "$rows" "$braidrun" -np 4 "$perf" "${args[@]}"

# Every datatype and op (fp8 included), 3 ranks: 12 types x 5 ops x sizes.
all_rows=$((12 * 5 * $(rows_for 8 4096 8)))
check "all types and ops, -t 3" "$all_rows" "$perf" -b 8 -e 4K -f 8 -c 1 -n 1 -w 0 -d all -o all -t 3

if [ "$failures" -ne 0 ]; then
  echo "perf_smoke: $failures failure(s)"
  exit 1
fi
echo "perf_smoke: all passed"
