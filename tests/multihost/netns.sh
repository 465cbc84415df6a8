#!/usr/bin/env bash
# netns.sh: runs one command on each of H "hosts" made of Linux network namespaces on this machine (root needed).
#
#   netns.sh run [options] -- command [args...]
#   netns.sh cleanup [--prefix P] [--all]     removes the leftovers of runs that were killed (SIGKILL)
#   netns.sh check                            exit 0 when namespaces work here, 77 (and why) when not
#   netns.sh check-netem                      exit 0 when the netem qdisc exists, 77 when not
#   netns.sh check-delay [--delay-tool PATH]  exit 0 when --delay works here (netem, or the TUN delay switch), 77 when not
#   netns.sh rsh host<i> command...           inside a run: runs command on host i (mpirun's plm_rsh_agent)
#
# run options:
#   -H, --hosts N        hosts, 2 to 4 (default 2)
#   --timeout S          hard limit for the whole run in seconds (default 120): then everything inside the hosts
#                        is killed and the exit status is 124
#   --delay D            a one-way delay D between any two hosts (e.g. 2ms, 500us; a round trip gets 2 x D): a netem
#                        qdisc on every host's interface when the kernel has sch_netem, else the TUN delay switch
#                        (tools/tun_delay: the bridge is replaced by a process that forwards every packet D late)
#   --delay-mode M       auto (default), netem or tun: how --delay is made
#   --delay-tool PATH    the TUN delay switch (default: $BRAID_TUN_DELAY, else build/tools/tun_delay/tun_delay in
#                        this checkout); with --log-dir its output and counters are kept in DIR/delay_switch.log
#   --port P             MASTER_PORT (default 29500; each run's addresses are private, so any port is free)
#   --prefix P           name prefix, 1-5 lowercase letters (default brd); names are P<pid>-h<i>, P<pid>-sw
#   --subnet 10.X.Y      host i gets 10.X.Y.(i+1)/24 (default 10.201.0)
#   --log-dir DIR        keep each host's output in DIR/host<i>.log (default: a temporary directory, removed)
#   --no-ifname          do not set NCCL_SOCKET_IFNAME (the library must find the interface itself)
#   --decoy-if           give each host an unrelated interface listed before the real one
#   --nics N             1 (default) or 2: with 2 each host also gets a second interface <tag>n<i> with address
#                        10.X.(Y+1).(i+1)/24 on a second bridge ("rails": one subnet per NIC); NCCL_SOCKET_IFNAME
#                        still names the first only (list both, e.g. NCCL_SOCKET_IFNAME=={ifname},{ifname2}, to use
#                        both). Not combinable with --delay.
#
# Each host's command runs inside its namespace with, in its environment:
#   NCCL_HOSTID=host<i>, NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME=<its interface>, MASTER_ADDR=<host 0's
#   address>, MASTER_PORT, NODE_RANK=<i>, NNODES=<H>, BRAID_NETNS_ADDR=<its address>, BRAID_NETNS_LOGDIR (the
#   log directory), BRAID_NETNS_TAG (the run's name tag: host j's namespace is $BRAID_NETNS_TAG-h<j>),
#   BRAID_NETNS_IF=<its interface>, BRAID_NETNS_NICS=<1 or 2>, and with --nics 2 BRAID_NETNS_IF2 and
#   BRAID_NETNS_ADDR2 (its second interface and address)
# Names host0 .. host<H-1> resolve to the hosts' addresses inside every host, and $BRAID_NETNS_LOGDIR/hostfile
# lists them, one a line, for mpirun --hostfile with --mca plm_rsh_agent "<this script> rsh".
# and in its arguments {host}, {nhosts}, {addr}, {master}, {port} and {ifname} are replaced by the same values, and
# with --nics 2 {ifname2} and {addr2}.
# The command also runs in its own UTS namespace with hostname host<i> (when unshare works), so logs name hosts.
# Output lines are prefixed with [host<i>]; with --log-dir, DIR/host<i>.rc and .end hold the status and end time. The exit status is 0 when every host's command succeeded, else the
# status of the lowest-numbered host that failed (124 on timeout). Namespaces, veths and the bridge (or the TUN
# delay switch, whose counters are printed) are removed on every exit, SIGINT, SIGTERM and SIGHUP included;
# `cleanup` handles a run that was SIGKILLed (the delay switch itself stops with its harness).
#
# Example: two hosts of two ranks each, over braidrun:
#   netns.sh run -H 2 -- build/tools/braidrun/braidrun -np 2 --nnodes {nhosts} --node-rank {host} \
#       --master-addr {master} --master-port {port} -- build/perf/all_reduce_perf -b 8 -e 1M -f 4
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/netns_lib.sh
source "$here/netns_lib.sh"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

die() {
  netns_log "$*"
  exit 2
}

cmd_check() {
  local reason
  if ! reason=$(netns_check); then
    netns_log "unavailable: $reason"
    exit 77
  fi
}

cmd_cleanup() {
  local prefix=brd all=""
  while [ $# -gt 0 ]; do
    case $1 in
      --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
      --all) all=all; shift ;;
      *) die "cleanup: unknown option '$1'" ;;
    esac
  done
  netns_cleanup_stale "$prefix" "$all"
}

# Sets HOST_COMMAND to the prefix that runs a command on host i: inside its namespace, in its own UTS namespace
# with hostname host<i> (when unshare works, so logs and errors name hosts), with the host's environment.
host_command() {
  local i=$1 master=$2 port=$3 set_ifname=$4 logdir=$5 ifname
  ifname=$(netns_host_if "$i")
  local env=(NCCL_HOSTID="host$i" MASTER_ADDR="$master" MASTER_PORT="$port" NODE_RANK="$i" NNODES="$NETNS_HOSTS"
    BRAID_NETNS_ADDR="$(netns_host_addr "$i")" BRAID_NETNS_LOGDIR="$logdir" BRAID_NETNS_TAG="$NETNS_TAG"
    BRAID_NETNS_SUBNET="$NETNS_SUBNET" BRAID_NETNS_IFNAME="$set_ifname" BRAID_NETNS_IF="$ifname"
    BRAID_NETNS_NICS="$NETNS_NICS")
  if [ "$NETNS_NICS" = 2 ]; then
    env+=(BRAID_NETNS_IF2="$(netns_host_if2 "$i")" BRAID_NETNS_ADDR2="$(netns_host_addr2 "$i")")
  fi
  if [ "$set_ifname" = 1 ]; then env+=(NCCL_SOCKET_IFNAME="$ifname" GLOO_SOCKET_IFNAME="$ifname"); fi
  HOST_COMMAND=(ip netns exec "$(netns_host_ns "$i")")
  if unshare --uts -- true 2>/dev/null; then
    # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
    HOST_COMMAND+=(unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "host$i")
  fi
  HOST_COMMAND+=(env "${env[@]}")
}

# mpirun's remote-shell agent inside a run: `rsh host<i> command...` runs the command line on host i, with that
# host's environment (as ssh would run it on a real host). Open MPI: --mca plm_rsh_agent "netns.sh rsh".
cmd_rsh() {
  local host=${1:?rsh: host name missing}
  shift
  [[ $host =~ ^host([0-9]+)$ ]] || die "rsh: '$host' is not a host of this run (host0, host1, ...)"
  [ -n "${BRAID_NETNS_TAG:-}" ] || die "rsh: only works inside 'netns.sh run' (BRAID_NETNS_TAG is not set)"
  NETNS_TAG=$BRAID_NETNS_TAG
  NETNS_SUBNET=${BRAID_NETNS_SUBNET:?}
  NETNS_HOSTS=${NNODES:?}
  NETNS_NICS=${BRAID_NETNS_NICS:-1}
  NETNS_SUBNET2=$(netns_next_subnet "$NETNS_SUBNET")
  host_command "${BASH_REMATCH[1]}" "${MASTER_ADDR:?}" "${MASTER_PORT:?}" "${BRAID_NETNS_IFNAME:-1}" \
    "${BRAID_NETNS_LOGDIR:-}"
  exec "${HOST_COMMAND[@]}" sh -c "$*"
}

# ---------------------------------------------------------------------------------------------------------------
hosts=2 timeout_s=120 delay="" delay_mode=auto port=29500 prefix=brd subnet=10.201.0 log_dir="" keep_logs=0 set_ifname=1 decoy=0 nics=1
work="" watchdog=""
delay_tool=${BRAID_TUN_DELAY:-$(cd "$here/../.." && pwd)/build/tools/tun_delay/tun_delay}

finish() {
  local status=$?
  trap - EXIT INT TERM HUP
  if [ -n "$watchdog" ]; then
    kill "$watchdog" 2>/dev/null || true
    wait "$watchdog" 2>/dev/null || true
  fi
  netns_teardown
  # The TUN delay switch's counters (packets per host, drops, lateness), logged when it stopped.
  if [ -n "$NETNS_DELAY_LOG" ] && [ -f "$NETNS_DELAY_LOG" ]; then grep -v "ready" "$NETNS_DELAY_LOG" >&2 || true; fi
  if [ -n "$work" ] && [ "$keep_logs" = 0 ]; then rm -rf "$work"; fi
  exit "$status"
}

on_signal() {
  netns_log "$1 received: stopping the hosts and removing the namespaces"
  case $1 in INT) exit 130 ;; HUP) exit 129 ;; *) exit 143 ;; esac
}

cmd_run() {
  while [ $# -gt 0 ]; do
    case $1 in
      -H | --hosts) hosts=${2:?}; shift 2 ;;
      --timeout) timeout_s=${2:?}; shift 2 ;;
      --delay) delay=${2:?}; shift 2 ;;
      --delay-mode) delay_mode=${2:?}; shift 2 ;;
      --delay-tool) delay_tool=${2:?}; shift 2 ;;
      --port) port=${2:?}; shift 2 ;;
      --prefix) prefix=${2:?}; shift 2 ;;
      --subnet) subnet=${2:?}; shift 2 ;;
      --log-dir) log_dir=${2:?}; shift 2 ;;
      --no-ifname) set_ifname=0; shift ;;
      --decoy-if) decoy=1; shift ;;
      --nics) nics=${2:?}; shift 2 ;;
      -h | --help) usage; exit 0 ;;
      --) shift; break ;;
      *) die "run: unknown option '$1' (put -- before the command)" ;;
    esac
  done
  [ $# -gt 0 ] || die "run: no command given (netns.sh run [options] -- command ...)"
  [[ $hosts =~ ^[2-4]$ ]] || die "--hosts must be 2, 3 or 4 (got '$hosts')"
  [[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds"
  [[ $delay_mode =~ ^(auto|netem|tun)$ ]] || die "--delay-mode must be auto, netem or tun (got '$delay_mode')"
  [[ $nics =~ ^[12]$ ]] || die "--nics must be 1 or 2 (got '$nics')"
  if [ "$nics" = 2 ] && [ -n "$delay" ]; then
    die "--nics 2 cannot be combined with --delay (the delay is made on one interface per host, or by the TUN" \
      "delay switch, which serves one subnet)"
  fi
  if ! [[ $port =~ ^[1-9][0-9]*$ ]] || [ "$port" -gt 65535 ]; then die "--port must be 1..65535"; fi
  local reason
  if ! reason=$(netns_check); then
    netns_log "unavailable: $reason"
    exit 77
  fi

  trap finish EXIT
  trap 'on_signal INT' INT
  trap 'on_signal TERM' TERM
  trap 'on_signal HUP' HUP

  if [ -n "$log_dir" ]; then
    mkdir -p "$log_dir"
    work=$log_dir
    keep_logs=1
  else
    work=$(mktemp -d /tmp/braid-netns.XXXXXX)
  fi
  netns_setup "$prefix" "$hosts" "$subnet" "$decoy" "$nics"
  if [ -n "$delay" ]; then netns_set_delay "$delay" "$delay_mode" "$delay_tool" "$work/delay_switch.log" || exit 4; fi
  local summary="" i
  for ((i = 0; i < hosts; i++)); do
    summary+="host$i=$(netns_host_addr "$i")"
    [ "$nics" = 1 ] || summary+=",$(netns_host_addr2 "$i")"
    summary+=" "
  done
  netns_log "$hosts hosts ($NETNS_TAG): $summary${delay:+delay $delay one way by $NETNS_DELAY_KIND}"

  # Watchdog: at the deadline, everything inside the hosts is killed, which ends the host jobs below.
  local main=$$
  (
    trap - EXIT INT TERM HUP
    end=$((SECONDS + timeout_s))
    while [ "$SECONDS" -lt "$end" ]; do
      sleep 1
      kill -0 "$main" 2>/dev/null || exit 0
    done
    echo timeout >"$work/timed_out"
    netns_log "timeout: ${timeout_s} s passed; killing every process in the hosts"
    for ((i = 0; i < hosts; i++)); do netns_signal_ns "$(netns_host_ns "$i")" TERM; done
    sleep 2
    for ((i = 0; i < hosts; i++)); do netns_signal_ns "$(netns_host_ns "$i")" KILL; done
  ) &
  watchdog=$!

  local i jobs=() master
  master=$(netns_host_addr 0)
  printf 'host%d\n' $(seq 0 $((hosts - 1))) >"$work/hostfile"
  for ((i = 0; i < hosts; i++)); do
    local addr ifname addr2="" ifname2="" args=() a
    addr=$(netns_host_addr "$i")
    ifname=$(netns_host_if "$i")
    if [ "$nics" = 2 ]; then
      addr2=$(netns_host_addr2 "$i")
      ifname2=$(netns_host_if2 "$i")
    fi
    for a in "$@"; do
      a=${a//\{host\}/$i}
      a=${a//\{nhosts\}/$hosts}
      a=${a//\{addr\}/$addr}
      a=${a//\{master\}/$master}
      a=${a//\{port\}/$port}
      a=${a//\{ifname\}/$ifname}
      if [ "$nics" = 2 ]; then
        a=${a//\{ifname2\}/$ifname2}
        a=${a//\{addr2\}/$addr2}
      fi
      args+=("$a")
    done
    host_command "$i" "$master" "$port" "$set_ifname" "$work"
    (
      trap - EXIT INT TERM HUP
      set +e
      "${HOST_COMMAND[@]}" "${args[@]}" </dev/null 2>&1 | tee "$work/host$i.log" |
        sed -u "s/^/[host$i] /"
      echo "${PIPESTATUS[0]}" >"$work/host$i.rc"
      date +%s.%N >"$work/host$i.end"
    ) &
    jobs+=($!)
  done
  for i in "${!jobs[@]}"; do wait "${jobs[$i]}" || true; done

  local status=0 rc
  for ((i = 0; i < hosts; i++)); do
    rc=$(cat "$work/host$i.rc" 2>/dev/null || echo 125)
    netns_log "host$i ($(netns_host_addr "$i")) exit status $rc"
    if [ "$rc" != 0 ] && [ "$status" = 0 ]; then status=$rc; fi
  done
  if [ -e "$work/timed_out" ]; then
    netns_log "timed out after ${timeout_s} s"
    status=124
  fi
  return "$status"
}

case ${1:-} in
  run) shift; cmd_run "$@" ;;
  rsh) shift; cmd_rsh "$@" ;;
  cleanup) shift; cmd_cleanup "$@" ;;
  check) cmd_check ;;
  check-netem)
    cmd_check
    if netns_netem_available; then exit 0; fi
    netns_log "the netem qdisc is not available in this kernel"
    exit 77
    ;;
  check-delay)
    shift
    cmd_check
    if [ "${1:-}" = --delay-tool ]; then delay_tool=${2:?--delay-tool needs a value}; fi
    if netns_netem_available; then exit 0; fi
    if reason=$(netns_tun_delay_available "$delay_tool"); then exit 0; fi
    netns_log "no delay possible: the kernel has no netem qdisc, and $reason"
    exit 77
    ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
