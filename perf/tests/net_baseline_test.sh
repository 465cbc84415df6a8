#!/usr/bin/env bash
# perf/tcp_pingpong over loopback (no root), then perf/net_baseline.sh in its shortest form (root, iperf3): the tools
# run and print positive figures. Timings are not judged.
#
#   perf/tests/net_baseline_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

build=$(cd "${1:?usage: net_baseline_test.sh BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: net_baseline_test.sh BUILD_DIR SOURCE_DIR}" && pwd)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# 1. tcp_pingpong on loopback: 3 sizes, each a row of positive numbers.
port=$((30000 + $$ % 20000))
"$build/perf/tcp_pingpong" -s -B 127.0.0.1 -p "$port" >/dev/null &
server=$!
out=$("$build/perf/tcp_pingpong" -c 127.0.0.1 -p "$port" -n 200 -w 10 8 512 65536)
wait "$server" || fail "tcp_pingpong server exited with status $?"
echo "$out"
rows=$(awk '!/^#/ && $2 > 0 && $3 > 0 && $4 > 0' <<<"$out" | wc -l)
[ "$rows" = 3 ] || fail "tcp_pingpong printed $rows good rows, expected 3"
if "$build/perf/tcp_pingpong" -c 127.0.0.1 -s 2>/dev/null; then fail "tcp_pingpong accepted -c with -s"; fi

# 2. net_baseline.sh across two namespaces.
if [ "$(id -u)" -ne 0 ] || ! command -v iperf3 >/dev/null || ! command -v ip >/dev/null; then
  echo "net_baseline.sh not run: needs root, ip and iperf3"
  exit 0
fi
rc=0
out=$("$src/perf/net_baseline.sh" --build "$build" --time 1 --streams 2 --iters 200 --delay 1ms 2>&1) || rc=$?
echo "$out"
[ "$rc" != 77 ] || { echo "net_baseline.sh skipped: namespaces unavailable"; exit 0; }
[ "$rc" = 0 ] || fail "net_baseline.sh exited with status $rc"
[ "$(grep -cE '^iperf3 .*: +[0-9]+\.[0-9]+ GB/s' <<<"$out")" = 3 ] || fail "expected 3 iperf3 figures"
[ "$(awk '!/^#/ && NF == 4 && $4 > 0' <<<"$out" | wc -l)" -ge 10 ] || fail "expected 2 x 5 ping-pong rows"
grep -q "netem delay 1ms" <<<"$out" || fail "the --delay run is not reported"
echo "ok"
