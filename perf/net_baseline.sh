#!/usr/bin/env bash
# Raw TCP between two "hosts" that are network namespaces joined through a veth/bridge (tests/multihost/netns_lib.sh):
# the stream bandwidth (iperf3) and the small-message round trip (perf/tcp_pingpong), i.e. what any socket transport
# can at best get on this machine. Root needed.
#
#   perf/net_baseline.sh [--build DIR] [--time S] [--streams N] [--delay D] [--iters N]
#
#   --build DIR   braid build directory holding perf/tcp_pingpong (default build)
#   --time S      seconds per iperf3 run (default 5)
#   --streams N   also measure N parallel streams (default 4; 1 is always measured)
#   --delay D     repeat everything with a one-way delay D between the hosts (a round trip gets 2 x D): netem on
#                 each host's interface, or where the kernel has no netem the TUN delay switch (tools/tun_delay,
#                 built in DIR; it replaces the bridge, see tests/multihost/netns_lib.sh); reported as unavailable
#                 when neither works
#   --iters N     ping-pong round trips per size (default 10000; 1000 under a delay)
#
# Also measured for reference: the same over loopback inside one namespace (no veth, no bridge).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=SCRIPTDIR/../tests/multihost/netns_lib.sh
source "$root/tests/multihost/netns_lib.sh"

build=$root/build secs=5 streams=4 delay="" iters=10000
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "${2:?}" && pwd); shift 2 ;;
    --time) secs=${2:?}; shift 2 ;;
    --streams) streams=${2:?}; shift 2 ;;
    --delay) delay=${2:?}; shift 2 ;;
    --iters) iters=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "net_baseline: unknown option '$1'" >&2; exit 2 ;;
  esac
done

pingpong=$build/perf/tcp_pingpong
[ -x "$pingpong" ] || { echo "net_baseline: $pingpong not built (cmake --build $build)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "net_baseline: iperf3 is not installed (apt-get install iperf3)" >&2; exit 2; }
if ! reason=$(netns_check); then
  echo "net_baseline: network namespaces unavailable: $reason" >&2
  exit 77
fi

trap netns_teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
netns_setup brn 2 10.202.0
server=$(netns_host_addr 0)

# iperf3 host0 (server) <- host1 (client); prints GB/s of the receiver.
stream() {  # from-host to-addr parallel
  local from=$1 to=$2 par=$3 json
  netns_exec 0 iperf3 -s -1 -B "$to" -p 5201 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  json=$(netns_exec "$from" iperf3 -c "$to" -p 5201 -t "$secs" -P "$par" -J --connect-timeout 3000)
  wait "$srv" || true
  python3 -c 'import json,sys; d=json.load(sys.stdin); bps=d["end"]["sum_received"]["bits_per_second"]
print("%.2f GB/s (%.1f Gbit/s)" % (bps / 8e9, bps / 1e9))' <<<"$json"
}

pings() {  # from-host to-addr iters
  netns_exec 0 "$pingpong" -s -B "$2" -p 5299 >/dev/null &
  local srv=$!
  netns_exec "$1" "$pingpong" -c "$2" -p 5299 -n "$3" -w 100 8 64 512 4096 65536
  wait "$srv" || true
}

measure() {  # label iters
  echo "== $1"
  echo "iperf3 host1 -> host0, 1 stream:  $(stream 1 "$server" 1)"
  [ "$streams" -le 1 ] || echo "iperf3 host1 -> host0, $streams streams: $(stream 1 "$server" "$streams")"
  echo "TCP ping-pong host1 -> host0:"
  pings 1 "$server" "$2"
}

echo "# $(uname -r), $(nproc) CPUs, $(iperf3 --version | head -1 | cut -d' ' -f1-2)"
echo "== reference: loopback inside one namespace"
echo "iperf3 lo, 1 stream:  $(stream 0 127.0.0.1 1)"
echo "TCP ping-pong lo:"
pings 0 127.0.0.1 "$iters"
measure "two namespaces through veth + bridge (no delay)" "$iters"
if [ -n "$delay" ]; then
  if netns_set_delay "$delay" auto "$build/tools/tun_delay/tun_delay"; then
    if [ "$NETNS_DELAY_KIND" = netem ]; then
      label="netem delay $delay on each host's interface"
    else
      label="delay $delay one way by the TUN delay switch (no netem in this kernel)"
    fi
    measure "two namespaces, $label" $((iters / 10 > 100 ? iters / 10 : 100))
  else
    echo "== delay $delay: unavailable (no netem in this kernel, and no TUN delay switch); not measured"
  fi
fi
