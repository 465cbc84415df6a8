#!/usr/bin/env bash
# braid's networks against raw TCP between two "hosts" (network namespaces joined by veth + bridge, one rank each),
# in one run: the raw TCP stream (iperf3) and round trip (perf/tcp_pingpong) from perf/net_baseline.sh, then
# sendrecv_perf and all_reduce_perf over the Socket network and over libfabric (OFI, tcp provider). Prints each
# network's busbw per size and its ratio to the raw stream, and the 8-byte latencies. Root needed.
#
#   perf/net_compare.sh [--build DIR] [--max BYTES] [--iters N]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build max=64M iters=20
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "${2:?}" && pwd); shift 2 ;;
    --max) max=${2:?}; shift 2 ;;
    --iters) iters=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "net_compare: unknown option '$1'" >&2; exit 2 ;;
  esac
done
netns=$root/tests/multihost/netns.sh
"$netns" check >/dev/null || { echo "net_compare: network namespaces are not usable here" >&2; exit 77; }
work=$(mktemp -d /tmp/braid-netcmp.XXXXXX)
trap 'rm -rf "$work"' EXIT

baseline=$("$root/perf/net_baseline.sh" --build "$build" --time 3 --streams 1 --iters 2000)
echo "$baseline"
# The veth section's single stream, in GB/s.
raw=$(printf "%s\n" "$baseline" | awk "/host1 -> host0, 1 stream/ {print \$(NF-3); exit}")

# run NAME TOOL [env...]: one rank per host; leaves host 0's table in $work/NAME.
run() {
  local name=$1 tool=$2
  shift 2
  env "$@" BRAID_TIMEOUT=60 "$netns" run -H 2 --timeout 300 --log-dir "$work/$name.d" -- \
    "$build/tools/braidrun/braidrun" -np 1 --nnodes "{nhosts}" --node-rank "{host}" --master-addr "{master}" \
    --master-port "{port}" -- "$build/perf/$tool" -b 8 -e "$max" -f 8 -c 1 -n "$iters" -w 3 >/dev/null 2>&1 ||
    { cat "$work/$name.d"/host*.log >&2; echo "net_compare: $name failed" >&2; exit 1; }
  awk '/^ *[0-9]+ +[0-9]+ +[a-z0-9]+ / {print $1, $6, $8}' "$work/$name.d/host0.log" >"$work/$name"
}

ofi=1
{ grep -q "^BRAID_WITH_LIBFABRIC:BOOL=ON" "$build/CMakeCache.txt" && grep -q "^LIBFABRIC_FOUND:INTERNAL=1" "$build/CMakeCache.txt"; } 2>/dev/null || ofi=0
for tool in sendrecv_perf all_reduce_perf; do
  run "socket-$tool" "$tool" NCCL_NET=Socket
  [ "$ofi" = 0 ] || run "ofi-$tool" "$tool" NCCL_NET=OFI FI_PROVIDER=tcp
  echo
  echo "== $tool, 2 hosts x 1 rank (out-of-place time us / busbw GB/s; ratio = busbw / raw TCP stream $raw GB/s)"
  printf '%12s %12s %10s %7s %12s %10s %7s\n' bytes socket-us socket-bw ratio ofi-us ofi-bw ratio
  if [ "$ofi" = 1 ]; then other=$work/ofi-$tool; else other=/dev/null; fi
  awk -v raw="$raw" 'NR == FNR {t[$1] = $2; b[$1] = $3; order[++n] = $1; next} {o[$1] = $2; ob[$1] = $3}
    END {
      for (i = 1; i <= n; ++i) { s = order[i]
        printf "%12s %12s %10s %7.2f %12s %10s %7s\n", s, t[s], b[s], b[s] / raw, (s in o ? o[s] : "-"),
          (s in ob ? ob[s] : "-"), (s in ob ? sprintf("%.2f", ob[s] / raw) : "-") }
    }' "$work/socket-$tool" "$other"
done
