#!/usr/bin/env bash
# perf/tcp_pingpong over loopback (no root), then perf/net_baseline.sh in its shortest form (root, iperf3): the tools
# run and print positive figures. Timings are not judged, except that a round trip under the 1 ms delay takes
# at least 2 ms.
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
  echo "SKIP: net_baseline.sh not run: needs root, ip and iperf3"
  exit 77
fi
rc=0
out=$("$src/perf/net_baseline.sh" --build "$build" --time 1 --streams 2 --iters 200 --delay 1ms 2>&1) || rc=$?
echo "$out"
[ "$rc" != 77 ] || { echo "SKIP: net_baseline.sh: namespaces unavailable"; exit 77; }
[ "$rc" = 0 ] || fail "net_baseline.sh exited with status $rc"
# The delayed run (netem, or the TUN delay switch without it) adds 2 iperf3 figures and 5 ping-pong rows, whose
# round trips take at least the two delays; a kernel and build with neither report it unavailable.
iperfs=3 pings=10
if grep -qE "^== two namespaces, .*delay 1ms" <<<"$out"; then
  iperfs=5 pings=15
  rtt=$(awk '/^== two namespaces, .*delay 1ms/ { on = 1 } on && !/^#/ && NF == 4 && $1 == 8 { print $2; exit }' <<<"$out")
  awk -v r="$rtt" 'BEGIN { exit !(r >= 2000) }' || fail "8-byte round trip under a 1 ms delay: '$rtt' us, not >= 2000"
else
  grep -q "delay 1ms: unavailable" <<<"$out" || fail "the --delay run is not reported"
fi
[ "$(grep -cE '^iperf3 .*: +[0-9]+\.[0-9]+ GB/s' <<<"$out")" = "$iperfs" ] || fail "expected $iperfs iperf3 figures"
[ "$(awk '!/^#/ && NF == 4 && $4 > 0' <<<"$out" | wc -l)" -ge "$pings" ] || fail "expected $pings ping-pong rows"
echo "ok"
