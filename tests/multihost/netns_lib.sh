# shellcheck shell=bash
# Several "hosts" on one machine made of Linux network namespaces: the functions behind tests/multihost/netns.sh
# and perf/net_baseline.sh. Source it, then:
#
#   netns_setup PREFIX HOSTS SUBNET [DECOY] [NICS]
#                                              hosts 0..HOSTS-1 joined by veth pairs to a bridge in a switch namespace;
#                                              NICS=2 gives each host a second veth to a second bridge (see below)
#   netns_set_delay DELAY [MODE] [TOOL] [LOG]  a one-way delay DELAY between any two hosts (a round trip gets 2 x
#                                              DELAY); MODE netem, tun or auto (the default: netem when the kernel
#                                              has it, else tun), see below
#   netns_exec I cmd...                        runs cmd inside host I's namespace
#   netns_teardown                             stops the TUN delay switch, kills what runs inside, deletes
#                                              namespaces, veths and the bridge
#   netns_cleanup_stale PREFIX [all]           the same for the leftovers of runs that were SIGKILLed
#
# Names: every object of one run carries the tag PREFIX + the PID of the script that made it (PREFIX of at most 5
# characters keeps interface names within Linux's 15): namespaces TAG-h0 .. TAG-h3 and TAG-sw, host interfaces
# TAGh0 .., switch ports TAGs0 .. and the bridge TAGbr inside TAG-sw (with NICS=2 also TAGn0 .., TAGt0 .. and TAGb2,
# see below). Nothing is created in the root namespace, so
# runs in parallel never collide, even on addresses: SUBNET (e.g. 10.201.0) is private to each run's switch.
#
# Host I's interface gets SUBNET.(I+1)/24 and is its only route out; lo is up; the names host0 .. resolve to the
# hosts' addresses inside every host (/etc/netns/<ns>/hosts, which `ip netns exec` mounts over /etc/hosts). With DECOY=1 each host also gets an
# unrelated, up veth pair (10.250.I.1/24) created before the real interface, so it is the first non-loopback
# interface in the host's list: a program that picks "the first interface" instead of the route to its peer fails.
#
# Two NICs per host (NICS=2, "rails"): host I also gets interface TAGn<I> (its switch port TAGt<I>) on a second
# bridge TAGb2 in the same switch namespace, with SUBNET2.(I+1)/24, where SUBNET2 is SUBNET's next /24 (10.X.Y ->
# 10.X.(Y+1), so Y must be below 255). The two bridges are not connected: a host reaches the others' second
# addresses only over its second interface, so the kernel's route to a destination address decides which
# interface a packet leaves by, and each interface's byte counters (/sys/class/net/<if>/statistics inside the
# namespace) show what went over it. The names host0 .. keep resolving to the first addresses. It cannot be combined
# with a delay (netns_set_delay refuses it: the TUN delay switch serves one subnet).
#
# The delay. netem: a `netem delay DELAY` qdisc on every host's veth (its egress). tun, for kernels without
# sch_netem: the bridge is replaced by TOOL (tools/tun_delay, built as build/tools/tun_delay/tun_delay), a
# process in the switch namespace that owns one TUN interface per host, named and addressed as the host's veth was
# (the veths are deleted), and passes every IPv4 packet to the destination host's interface DELAY after reading it.
# Its output (a ready line, and its counters when it stops) goes to LOG (default: a temporary file, removed by
# netns_teardown). Either way, host I's interface and address, and so NCCL_SOCKET_IFNAME, stay the same.
# NETNS_DELAY_KIND is then netem or tun.

NETNS_TAG=""
NETNS_HOSTS=0
NETNS_SUBNET=""
NETNS_SUBNET2=""
NETNS_NICS=1
NETNS_DELAY_KIND=""
NETNS_DELAY_PID=""
NETNS_DELAY_LOG=""
NETNS_DELAY_TMPLOG=""

netns_log() { printf 'netns: %s\n' "$*" >&2; }

# Returns 0 when namespaces and veths can be made here; otherwise prints why and returns 1.
netns_check() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root (network namespaces need CAP_SYS_ADMIN)"
    return 1
  fi
  if ! command -v ip >/dev/null 2>&1; then
    echo "the ip command (iproute2) is not installed"
    return 1
  fi
  local probe="brdprobe$$"
  if ! ip netns add "$probe" >/dev/null 2>&1; then
    echo "'ip netns add' fails here (no network namespace support)"
    return 1
  fi
  if ! ip -n "$probe" link add "${probe}a" type veth peer name "${probe}b" >/dev/null 2>&1; then
    ip netns del "$probe" >/dev/null 2>&1 || true
    echo "veth pairs cannot be created here"
    return 1
  fi
  ip netns del "$probe" >/dev/null 2>&1 || true
  return 0
}

# 0 when the netem qdisc exists in this kernel.
netns_netem_available() {
  local probe="brdnetem$$" ok=1
  ip netns add "$probe" >/dev/null 2>&1 || return 1
  ip -n "$probe" link set lo up >/dev/null 2>&1 || true
  if ip netns exec "$probe" tc qdisc add dev lo root netem delay 1ms >/dev/null 2>&1; then ok=0; fi
  ip netns del "$probe" >/dev/null 2>&1 || true
  return "$ok"
}

netns_host_ns() { printf '%s-h%s' "$NETNS_TAG" "$1"; }
netns_host_if() { printf '%sh%s' "$NETNS_TAG" "$1"; }
netns_host_addr() { printf '%s.%s' "$NETNS_SUBNET" "$(($1 + 1))"; }
# The second NIC (NICS=2): interface and address.
netns_host_if2() { printf '%sn%s' "$NETNS_TAG" "$1"; }
netns_host_addr2() { printf '%s.%s' "$NETNS_SUBNET2" "$(($1 + 1))"; }
# Host I's interfaces, one or two, space-separated.
netns_host_ifs() {
  netns_host_if "$1"
  if [ "$NETNS_NICS" = 2 ]; then printf ' %s' "$(netns_host_if2 "$1")"; fi
}
# SUBNET's next /24: 10.X.Y -> 10.X.(Y+1) (empty when Y is 255).
netns_next_subnet() {
  local y=${1##*.}
  [ "$y" -lt 255 ] || return 0
  printf '%s.%s' "${1%.*}" "$((y + 1))"
}
netns_switch_ns() { printf '%s-sw' "$NETNS_TAG"; }

netns_setup() {
  local prefix=$1 hosts=$2 subnet=$3 decoy=${4:-0} nics=${5:-1}
  if ! [[ $prefix =~ ^[a-z]{1,5}$ ]]; then
    netns_log "prefix '$prefix' must be 1-5 lowercase letters"
    return 2
  fi
  if ! [[ $subnet =~ ^10\.[0-9]{1,3}\.[0-9]{1,3}$ ]]; then
    netns_log "subnet '$subnet' must look like 10.X.Y"
    return 2
  fi
  if [ "$nics" != 1 ] && [ "$nics" != 2 ]; then
    netns_log "NICS must be 1 or 2 (got '$nics')"
    return 2
  fi
  NETNS_SUBNET2=$(netns_next_subnet "$subnet")
  if [ "$nics" = 2 ] && [ -z "$NETNS_SUBNET2" ]; then
    netns_log "subnet '$subnet' has no next /24 for the second NICs (10.X.Y needs Y < 255)"
    return 2
  fi
  NETNS_TAG="${prefix}$$"
  NETNS_HOSTS=$hosts
  NETNS_SUBNET=$subnet
  NETNS_NICS=$nics
  local sw br i ns
  sw=$(netns_switch_ns)
  br="${NETNS_TAG}br"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add "$br" type bridge
  ip -n "$sw" link set "$br" up
  if [ "$nics" = 2 ]; then
    ip -n "$sw" link add "${NETNS_TAG}b2" type bridge
    ip -n "$sw" link set "${NETNS_TAG}b2" up
  fi
  for ((i = 0; i < hosts; i++)); do
    ns=$(netns_host_ns "$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    if [ "$decoy" = 1 ]; then
      ip -n "$ns" link add "${NETNS_TAG}d${i}" type veth peer name "${NETNS_TAG}e${i}"
      ip -n "$ns" link set "${NETNS_TAG}d${i}" up
      ip -n "$ns" link set "${NETNS_TAG}e${i}" up
      ip -n "$ns" addr add "10.250.${i}.1/24" dev "${NETNS_TAG}d${i}"
    fi
    # Created inside the two namespaces at once: the names never exist in the root namespace.
    ip link add "$(netns_host_if "$i")" netns "$ns" type veth peer name "${NETNS_TAG}s${i}" netns "$sw"
    ip -n "$sw" link set "${NETNS_TAG}s${i}" master "$br" up
    ip -n "$ns" addr add "$(netns_host_addr "$i")/24" dev "$(netns_host_if "$i")"
    ip -n "$ns" link set "$(netns_host_if "$i")" up
    if [ "$nics" = 2 ]; then  # after the first, so that it comes second in the host's interface list
      ip link add "$(netns_host_if2 "$i")" netns "$ns" type veth peer name "${NETNS_TAG}t${i}" netns "$sw"
      ip -n "$sw" link set "${NETNS_TAG}t${i}" master "${NETNS_TAG}b2" up
      ip -n "$ns" addr add "$(netns_host_addr2 "$i")/24" dev "$(netns_host_if2 "$i")"
      ip -n "$ns" link set "$(netns_host_if2 "$i")" up
    fi
  done
  # Host names resolve inside every host: `ip netns exec` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts.
  for ((i = 0; i < hosts; i++)); do
    ns=$(netns_host_ns "$i")
    mkdir -p "/etc/netns/$ns"
    {
      printf '127.0.0.1\tlocalhost\n'
      local j
      for ((j = 0; j < hosts; j++)); do printf '%s\thost%d\n' "$(netns_host_addr "$j")" "$j"; done
    } >"/etc/netns/$ns/hosts"
  done
  # The bridge forwards once its ports leave the listening state; with STP off that is at once, but wait for
  # carrier on every host so the first packet is not lost to a link still coming up.
  local tries ifname
  for ((i = 0; i < hosts; i++)); do
    for ifname in $(netns_host_ifs "$i"); do
      for ((tries = 0; tries < 50; tries++)); do
        ip -n "$(netns_host_ns "$i")" link show "$ifname" | grep -q "LOWER_UP" && break
        sleep 0.1
      done
    done
  done
}

# 0 when the TUN delay switch can run: TOOL is an executable and /dev/net/tun exists; otherwise prints why.
netns_tun_delay_available() {
  local tool=$1
  if [ -z "$tool" ] || [ ! -x "$tool" ]; then
    echo "the TUN delay switch '${tool:-tun_delay}' is not built (cmake --build build --target tun_delay)"
    return 1
  fi
  if [ ! -c /dev/net/tun ]; then
    echo "/dev/net/tun does not exist (no TUN support in this kernel)"
    return 1
  fi
  return 0
}

netns_set_delay() {
  local delay=$1 mode=${2:-auto} tool=${3:-} log=${4:-} i
  if [ "$NETNS_NICS" != 1 ]; then
    netns_log "a delay cannot be combined with two NICs per host (the TUN delay switch serves one subnet)"
    return 2
  fi
  if ! [[ $delay =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]]; then
    netns_log "delay '$delay' must be a number with us, ms or s (e.g. 2ms)"
    return 2
  fi
  if [ "$mode" = auto ]; then
    mode=tun
    if netns_netem_available; then mode=netem; fi
  fi
  case $mode in
    netem)
      for ((i = 0; i < NETNS_HOSTS; i++)); do
        if ! ip netns exec "$(netns_host_ns "$i")" tc qdisc add dev "$(netns_host_if "$i")" root netem delay "$delay"; then
          netns_log "cannot add 'netem delay $delay' on host $i (is sch_netem in this kernel?)"
          return 1
        fi
      done
      ;;
    tun) netns_start_tun_delay "$delay" "$tool" "$log" || return 1 ;;
    *)
      netns_log "delay mode '$mode' must be netem, tun or auto"
      return 2
      ;;
  esac
  # shellcheck disable=SC2034 # read by the scripts that source this file
  NETNS_DELAY_KIND=$mode
}

# The bridge and the veths give way to the TUN delay switch (see the top of this file).
netns_start_tun_delay() {
  local delay=$1 tool=$2 log=$3 reason i sw args=()
  if ! reason=$(netns_tun_delay_available "$tool"); then
    netns_log "no delay: $reason"
    return 1
  fi
  if [ -z "$log" ]; then
    log=$(mktemp /tmp/braid-netns-delay.XXXXXX)
    NETNS_DELAY_TMPLOG=$log
  fi
  # shellcheck disable=SC2034 # read by the scripts that source this file
  NETNS_DELAY_LOG=$log
  : >"$log"
  sw=$(netns_switch_ns)
  for ((i = 0; i < NETNS_HOSTS; i++)); do
    ip -n "$(netns_host_ns "$i")" link del "$(netns_host_if "$i")"  # its switch port goes with it
    args+=(--host "$(netns_host_ns "$i"):$(netns_host_if "$i"):$(netns_host_addr "$i")")
  done
  ip -n "$sw" link del "${NETNS_TAG}br"
  # In the switch namespace, so that `ip netns pids` (and so netns_delete) finds it; it also stops when this
  # shell dies (PR_SET_PDEATHSIG), and its interfaces go with it. SCHED_FIFO (--realtime), so that packets leave
  # on time while the ranks keep every CPU busy; it sleeps between packets.
  ip netns exec "$sw" "$tool" --realtime --delay "$delay" "${args[@]}" </dev/null >"$log" 2>&1 &
  NETNS_DELAY_PID=$!
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    grep -q "^tun_delay: ready" "$log" && break
    if ! kill -0 "$NETNS_DELAY_PID" 2>/dev/null; then break; fi
    sleep 0.05
  done
  if ! grep -q "^tun_delay: ready" "$log"; then
    netns_log "the TUN delay switch did not start: $(tr '\n' ' ' <"$log")"
    return 1
  fi
  for ((i = 0; i < NETNS_HOSTS; i++)); do
    ip -n "$(netns_host_ns "$i")" addr add "$(netns_host_addr "$i")/24" dev "$(netns_host_if "$i")"
  done
}

# Stops the TUN delay switch (SIGTERM, so it logs its counters; SIGKILL after 3 s).
netns_stop_tun_delay() {
  [ -n "$NETNS_DELAY_PID" ] || return 0
  local tries
  kill -TERM "$NETNS_DELAY_PID" 2>/dev/null || true
  for ((tries = 0; tries < 60; tries++)); do
    kill -0 "$NETNS_DELAY_PID" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$NETNS_DELAY_PID" 2>/dev/null || true
  wait "$NETNS_DELAY_PID" 2>/dev/null || true
  NETNS_DELAY_PID=""
}

netns_exec() {
  local i=$1
  shift
  ip netns exec "$(netns_host_ns "$i")" "$@"
}

# Sends sig to every process inside namespace ns.
netns_signal_ns() {
  local ns=$1 sig=$2 pid
  for pid in $(ip netns pids "$ns" 2>/dev/null); do
    kill "-$sig" "$pid" 2>/dev/null || true
  done
}

# Deletes namespaces (processes first: a namespace with processes would outlive its name). Veths go with their
# namespace, the bridge with the switch's.
netns_delete() {
  local ns
  for ns in "$@"; do
    netns_signal_ns "$ns" KILL
  done
  for ns in "$@"; do
    local tries
    for ((tries = 0; tries < 50; tries++)); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
      sleep 0.1
    done
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
}

netns_teardown() {
  netns_stop_tun_delay
  if [ -n "$NETNS_DELAY_TMPLOG" ]; then rm -f "$NETNS_DELAY_TMPLOG"; fi
  NETNS_DELAY_TMPLOG=""
  [ -n "$NETNS_TAG" ] || return 0
  local names=() ns
  while read -r ns _; do
    case $ns in "$NETNS_TAG"-h* | "$NETNS_TAG"-sw) names+=("$ns") ;; esac
  done < <(ip netns list 2>/dev/null)
  [ ${#names[@]} -eq 0 ] || netns_delete "${names[@]}"
  NETNS_TAG=""
}

# Removes namespaces PREFIX<pid>-* whose run (process <pid>) is gone; with "all", those of live runs too.
netns_cleanup_stale() {
  local prefix=$1 all=${2:-} ns pid names=()
  while read -r ns _; do
    [[ $ns =~ ^${prefix}([0-9]+)-(h[0-9]+|sw)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    if [ "$all" = all ] || ! kill -0 "$pid" 2>/dev/null; then names+=("$ns"); fi
  done < <(ip netns list 2>/dev/null)
  local dir
  for dir in /etc/netns/"$prefix"*; do  # hosts files whose namespace is already gone
    [ -d "$dir" ] || continue
    ns=${dir##*/}
    [[ $ns =~ ^${prefix}([0-9]+)-h[0-9]+$ ]] || continue
    if [ "$all" = all ] || ! kill -0 "${BASH_REMATCH[1]}" 2>/dev/null; then rm -rf "$dir"; fi
  done
  if [ ${#names[@]} -gt 0 ]; then
    netns_log "removing ${names[*]}"
    netns_delete "${names[@]}"
  fi
}
