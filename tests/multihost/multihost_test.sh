#!/usr/bin/env bash
# Multi-host tests on one machine: hosts are network namespaces (tests/multihost/netns.sh), one braidrun per host.
#
#   multihost_test.sh BUILD_DIR MODE
#
# MODE:
#   hosts2    2 hosts x 2 ranks: all_reduce_perf, alltoall_perf, sendrecv_perf
#   hosts3    3 hosts x 1 rank: all_reduce_perf, reduce_scatter_perf; 3 hosts x 2 ranks: all_gather_perf
#   mpi       mpirun --hostfile across 2 hosts x 2 ranks (all_reduce_perf) and 3 x 1 (alltoall_perf)
#   kill      host 1's ranks are SIGKILLed mid-run; host 0's ranks must fail, naming a dead rank, within a bound
#   hang      host 1's ranks are SIGSTOPped mid-run; host 0's ranks must fail after BRAID_TIMEOUT, naming a rank
#   cleanup   no namespace or process is left after success, timeout, SIGTERM, SIGINT; a SIGKILLed harness's
#             leftovers are removed by `netns.sh cleanup`, which spares live runs
#   ifname    without NCCL_SOCKET_IFNAME, with an unrelated interface listed first on every host: the bootstrap
#             must listen on the interface routed to the root (regression: it took the first one and hung)
#   netem     2 hosts x 2 ranks, all_reduce_perf 8 B .. 8 MB without and with a 1 ms one-way delay between hosts
#             (netem, or the TUN delay switch tools/tun_delay where the kernel lacks netem): the network latency the
#             ranks measure at init must show the delay, every rank must choose the same algorithm per size, and
#             some sizes must move from ring to tree under the delay (the latency-bound range grows)
#   rails     2 hosts x 2 ranks with two NICs per host (netns.sh --nics 2, one subnet each), NCCL_SOCKET_IFNAME
#             naming both and BRAID_CPU_NCHANNELS=2: all_reduce_perf up to 16 MB and alltoall_perf up to 256 KB;
#             every rank must list both Socket devices, connections must run via NET/Socket/0 and /1, and each
#             interface of each host must have sent at least 20% of that host's bytes (its counters in /sys)
#   tls       2 hosts x 2 ranks with BRAID_ENCRYPTION_KEY_FILE (ncclSetEncryption's key for programs that do not
#             call it): all_reduce_perf and alltoall_perf exact, every Socket-network connection TLS 1.3; then host 1
#             with another key: the run must fail within its timeout, host 1 naming the refused TLS handshake
#
# Every perf run must exit 0 on every host (each rank exits 1 on any wrong value), print one table row per size
# with #wrong 0 in both columns, and every rank must log nNodes = hosts with its localRank on its own host.
# Exit status 77 (ctest SKIP_RETURN_CODE) when not root or network namespaces do not work here.
#
# Ranks of different hosts talk through the network transport (the Socket network over the namespaces' veths);
# every run also checks that a rank logged a connection via NET/Socket.
set -euo pipefail

build=$(cd "${1:?usage: multihost_test.sh BUILD_DIR MODE}" && pwd)
mode=${2:?usage: multihost_test.sh BUILD_DIR MODE}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
netns=$here/netns.sh
braidrun=$build/tools/braidrun/braidrun

if ! "$netns" check; then
  echo "SKIP: network namespaces are not usable here"
  exit 77
fi

# Leftovers of runs that were SIGKILLed (a ctest timeout) go first; live runs are spared.
"$netns" cleanup >/dev/null 2>&1 || true

work=$(mktemp -d /tmp/braid-multihost.XXXXXX)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

export BRAID_TIMEOUT=${BRAID_TIMEOUT:-20}
debug_subsys=INIT,BOOTSTRAP,NET  # NCCL_DEBUG_SUBSYS of every run

# run_perf NAME HOSTS RANKS_PER_HOST ROWS [--mpirun] [--env VAR=VALUE]... [--bytes] [netns options] -- tool args...:
# runs tool on every host (one braidrun each, or one mpirun on host 0 that starts the others through `netns.sh
# rsh`) and checks the result; ROWS is the number of sizes the table must show. --env sets VAR in every host's
# braidrun ({ifname}, {ifname2} .. are replaced by netns.sh); --bytes writes what each interface of host i sent and
# received during the run to NAME/host<i>.bytes ("interface tx_bytes rx_bytes" a line; see count_bytes).
run_perf() {
  local name=$1 hosts=$2 np=$3 expected_rows=$4
  shift 4
  local opts=() launcher=braidrun wrap=() envs=()
  while [ "$1" != "--" ]; do
    case $1 in
      --mpirun) launcher=mpirun ;;
      --env) envs+=("$2"); shift ;;
      --bytes) write_count_bytes; wrap=("$work/count_bytes.sh") ;;
      *) opts+=("$1") ;;
    esac
    shift
  done
  [ ${#envs[@]} -eq 0 ] || wrap+=(env "${envs[@]}")
  shift
  local tool=$1
  shift
  local dir=$work/$name
  echo "== $name: $hosts hosts x $np ranks by $launcher: $tool $*"
  local rc=0 cmd
  if [ "$launcher" = braidrun ]; then
    cmd=("${wrap[@]}" "$braidrun" -np "$np" --nnodes "{nhosts}" --node-rank "{host}" --master-addr "{master}"
      --master-port "{port}" -- "$build/perf/$tool" "$@")
  else
    # shellcheck disable=SC2016 # expanded on host 0
    cmd=(bash -c '[ "$NODE_RANK" != 0 ] || exec "$@"' mpirun mpirun --allow-run-as-root --bind-to none
      --hostfile "$dir/hostfile" --mca plm_rsh_agent "$netns rsh" -N "$np" -np $((hosts * np))
      -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x BRAID_TIMEOUT
      "$build/perf/$tool" "$@")
  fi
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=$debug_subsys "$netns" run -H "$hosts" --timeout 90 --log-dir "$dir" "${opts[@]}" -- \
    "${cmd[@]}" >"$dir.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    cat "$dir.out"
    fail "$name: the harness exited with status $rc (0 expected on every host)"
  fi
  # The table (host 0, rank 0): one row per size, #wrong 0 out of place and in place.
  local rows
  rows=$(awk '/^ *[0-9]+ +[0-9]+ +[a-z0-9]+ /' "$dir/host0.log")
  if [ "$(printf '%s\n' "$rows" | grep -c .)" != "$expected_rows" ]; then
    cat "$dir.out"
    fail "$name: expected $expected_rows table rows"
  fi
  # sendrecv_perf's in-place column is N/A, as in nccl-tests (one buffer cannot be sent and received at once).
  local inplace_na=0
  [ "$tool" != sendrecv_perf ] || inplace_na=1
  printf '%s\n' "$rows" | awk -v name="$name" -v na="$inplace_na" '{
      if ($9 != "0" || !($13 == "0" || (na && $13 == "N/A"))) { print "FAIL: " name ": #wrong is not 0: " $0; bad = 1 }
    } END { exit bad }' || fail "$name: wrong values"
  # Node grouping: rank r is on host r / np (its log lines start with that hostname) with localRank r % np, and
  # every rank sees nNodes = hosts.
  local nranks=$((hosts * np)) r h
  for ((r = 0; r < nranks; r++)); do
    h=$((r / np))
    grep -Eqh "^host$h:[0-9]+:[0-9]+ .* rank $r nRanks $nranks nNodes $hosts localRanks $np localRank $((r % np)) " \
      "$dir"/host*.log ||
      { cat "$dir.out"; fail "$name: no init line of rank $r on host$h with nNodes $hosts localRank $((r % np))"; }
    # Its bootstrap listener is on host h's own interface and address.
    grep -Eqh "^host$h:.* bootstrap: rank $r/$nranks listening on 10\.201\.0\.$((h + 1)):[0-9]+ \([a-z]+[0-9]+h$h\)" \
      "$dir"/host*.log ||
      { cat "$dir.out"; fail "$name: rank $r does not listen on host$h's interface"; }
  done
  # Hosts are connected by the network transport.
  local via
  via=$(grep -ho "via NET/[A-Za-z]*" "$dir"/host*.log | sort -u | head -3 | tr '\n' ';' || true)
  [ -n "$via" ] || { cat "$dir.out"; fail "$name: no rank logged a network connection (via NET/...)"; }
  echo "   ok: $(printf '%s\n' "$rows" | wc -l) sizes, #wrong 0, nNodes $hosts on every rank, $via"
}

std=(-b 8 -e 1M -f 4 -c 1 -n 2 -w 1)  # 8 B .. 512 KB: 9 sizes

# $work/count_bytes.sh command...: runs the command on a host of `netns.sh run`, then writes what each of the host's
# interfaces (BRAID_NETNS_IF, BRAID_NETNS_IF2) sent and received meanwhile to $BRAID_NETNS_LOGDIR/host<i>.bytes,
# "interface tx_bytes rx_bytes" a line: the counters in /sys/class/net, which `ip netns exec` mounts for the
# host's namespace.
write_count_bytes() {
  cat >"$work/count_bytes.sh" <<'EOF'
#!/usr/bin/env bash
set -uo pipefail
ifs=("$BRAID_NETNS_IF")
[ -z "${BRAID_NETNS_IF2:-}" ] || ifs+=("$BRAID_NETNS_IF2")
snap() {
  local f
  for f in "${ifs[@]}"; do
    echo "$f $(cat "/sys/class/net/$f/statistics/tx_bytes") $(cat "/sys/class/net/$f/statistics/rx_bytes")"
  done
}
before=$(snap)
"$@"
rc=$?
snap | awk -v before="$before" 'BEGIN { n = split(before, l, "\n"); for (i = 1; i <= n; i++) { split(l[i], f, " ")
    tx[f[1]] = f[2]; rx[f[1]] = f[3] } } { print $1, $2 - tx[$1], $3 - rx[$1] }' \
  >"$BRAID_NETNS_LOGDIR/host$NODE_RANK.bytes"
exit "$rc"
EOF
  chmod +x "$work/count_bytes.sh"
}

# ---------------------------------------------------------------------------------------------------------------
all_tools=(all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf broadcast_perf reduce_perf sendrecv_perf
  gather_perf scatter_perf)
short=(-b 8 -e 256K -f 8 -c 1 -n 2 -w 1)  # 8 B .. 256 KB: 6 sizes

# Every collective across 2 hosts x 2 ranks and 3 hosts x 1 and x 2 ranks, and 4 x 1 and 2 x 4, over the network.
mode_hosts2() {
  run_perf ar2x2 2 2 9 -- all_reduce_perf "${std[@]}"
  local t
  for t in "${all_tools[@]:1}"; do run_perf "${t%_perf}2x2" 2 2 6 -- "$t" "${short[@]}"; done
  # NVLSTree, forced: NVLS-style inside each host, the network between.
  (export NCCL_ALGO=allreduce:nvlstree; run_perf ar_nvlstree2x2 2 2 9 -- all_reduce_perf "${std[@]}") || exit 1
}

mode_hosts3() {
  run_perf ar3x1 3 1 9 -- all_reduce_perf "${std[@]}"
  run_perf ag3x2 3 2 9 -- all_gather_perf "${std[@]}"
  local t
  for t in "${all_tools[@]:2}"; do run_perf "${t%_perf}3x1" 3 1 6 -- "$t" "${short[@]}"; done
  # The corners of 2-4 hosts x 1-4 ranks.
  run_perf ar4x1 4 1 6 -- all_reduce_perf "${short[@]}"
  run_perf a2a4x1 4 1 6 -- alltoall_perf "${short[@]}"
  run_perf ar2x4 2 4 6 -- all_reduce_perf "${short[@]}"
}

# The same over libfabric (the OFI network on its tcp provider) instead of the Socket network.
mode_ofi() {
  if ! grep -q "^BRAID_WITH_LIBFABRIC:BOOL=ON" "$build/CMakeCache.txt" ||
    ! grep -q "^LIBFABRIC_FOUND:INTERNAL=1" "$build/CMakeCache.txt"; then
    echo "SKIP: braid was built without libfabric"
    exit 77
  fi
  export NCCL_NET=OFI FI_PROVIDER=tcp
  local t
  for t in "${all_tools[@]}"; do run_perf "${t%_perf}_ofi2x2" 2 2 6 -- "$t" "${short[@]}"; done
  run_perf ar_ofi3x1 3 1 9 -- all_reduce_perf "${std[@]}"
  run_perf a2a_ofi3x1 3 1 6 -- alltoall_perf "${short[@]}"
}

# mpirun with a hostfile of host0, host1; its remote shell is `netns.sh rsh`. The unique id travels by MPI_Bcast.
mode_mpi() {
  if ! command -v mpirun >/dev/null || ! "$build/perf/all_reduce_perf" --baseline mpi -b 8 -e 8 -n 1 -w 0 \
    >/dev/null 2>&1; then
    echo "SKIP: no mpirun, or the perf tools were built without MPI"
    exit 77
  fi
  run_perf mpi2x2 2 2 9 --mpirun -- all_reduce_perf "${std[@]}"
  run_perf mpi3x1 3 1 9 --mpirun -- alltoall_perf "${std[@]}"
}

mode_tls() {
  local key=$work/key
  (umask 077 && head -c 48 /dev/urandom | base64 -w0 >"$key")
  run_perf ar_tls2x2 2 2 9 --env "BRAID_ENCRYPTION_KEY_FILE=$key" -- all_reduce_perf "${std[@]}"
  run_perf a2a_tls2x2 2 2 6 --env "BRAID_ENCRYPTION_KEY_FILE=$key" -- alltoall_perf "${short[@]}"
  local name
  for name in ar_tls2x2 a2a_tls2x2; do
    grep -qh "TLS 1.3 with the key of BRAID_ENCRYPTION_KEY_FILE" "$work/$name"/host*.log ||
      fail "$name: no rank logged that it took the key file"
    grep -qh "NET/Socket : connected to .* over TLS 1.3" "$work/$name"/host*.log ||
      fail "$name: no Socket-network connection logged TLS 1.3"
  done
  # Host 1 with another key: its connections are refused; nobody waits past the deadline.
  (umask 077 && cp "$key" "$work/key0" && head -c 48 /dev/urandom | base64 -w0 >"$work/key1")
  local dir=$work/tls_mismatch rc=0 start=$SECONDS
  mkdir -p "$dir"
  echo "== tls_mismatch: 2 hosts x 1 rank, host 1 with another key"
  NCCL_DEBUG=WARN BRAID_TIMEOUT=5 "$netns" run -H 2 --timeout 60 --log-dir "$dir" -- \
    env "BRAID_ENCRYPTION_KEY_FILE=$work/key{host}" "$braidrun" -np 1 --nnodes "{nhosts}" --node-rank "{host}" \
    --master-addr "{master}" --master-port "{port}" -- "$build/perf/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 \
    >"$dir.out" 2>&1 || rc=$?
  [ "$rc" != 0 ] || { cat "$dir.out"; fail "tls_mismatch: a host with another key completed the run"; }
  [ "$rc" != 124 ] || { cat "$dir.out"; fail "tls_mismatch: the run hung until the harness's timeout"; }
  grep -qh "TLS handshake with .* failed" "$dir"/host*.log || { cat "$dir.out" "$dir"/host*.log; fail "tls_mismatch: no rank named the refused TLS handshake"; }
  echo "   ok: refused after $((SECONDS - start)) s (exit $rc)"
}

mode_ifname() {
  run_perf decoy 2 1 9 --no-ifname --decoy-if -- all_reduce_perf "${std[@]}"
}

# The latency the ranks measured at init (rank 0's "network: ... X us per message" line), in us.
network_alpha() {
  grep -ho " rank 0 network: .* us per message" "$1"/host*.log | head -1 | sed -E 's/.* ([0-9.]+) us per message/\1/'
}

# "bytes algorithm" for each all-reduce size of a run, from every rank's TUNING lines; fails when ranks disagree.
chosen_algorithms() {
  local pairs
  pairs=$(grep -hoE "allreduce [0-9]+ bytes, [0-9]+ ranks: .* -> [A-Za-z]+/" "$1"/host*.log |
    sed -E 's/^allreduce ([0-9]+) bytes.* -> ([A-Za-z]+)\/$/\1 \2/' | sort -u -k1,1n -k2,2)
  [ -n "$pairs" ] || fail "$1: no TUNING line for allreduce"
  local split
  split=$(awk '{ n[$1]++ } END { for (b in n) if (n[b] > 1) print b }' <<<"$pairs")
  [ -z "$split" ] || fail "$1: ranks chose different algorithms for $split bytes: $(tr '\n' ';' <<<"$pairs")"
  printf '%s\n' "$pairs"
}

mode_netem() {
  local tool=$build/tools/tun_delay/tun_delay delay_us=1000
  if ! "$netns" check-delay --delay-tool "$tool"; then
    echo "SKIP: no way to delay packets here (no netem qdisc, no TUN delay switch)"
    exit 77
  fi
  debug_subsys=INIT,BOOTSTRAP,NET,TUNING
  local sweep=(-b 8 -e 8M -f 4 -c 1 -n 2 -w 1)  # 8 B .. 8 MB: 11 sizes
  run_perf delay0 2 2 11 -- all_reduce_perf "${sweep[@]}"
  run_perf delay1ms 2 2 11 --delay "${delay_us}us" --delay-tool "$tool" -- all_reduce_perf "${sweep[@]}"
  grep -h "delay ${delay_us}us one way by" "$work/delay1ms.out" | sed 's/^/   /'
  grep -h "^tun_delay: dropped" "$work/delay1ms.out" | sed 's/^/   /' || true

  # The ranks measure the network's latency at init: one way, so the delay once, plus what it was without.
  local a0 a1
  a0=$(network_alpha "$work/delay0")
  a1=$(network_alpha "$work/delay1ms")
  if [ -z "$a0" ] || [ -z "$a1" ]; then fail "netem: no 'network: ... us per message' line of rank 0"; fi
  echo "   measured latency per message: $a0 us without delay, $a1 us with ${delay_us} us"
  awk -v a0="$a0" -v a1="$a1" -v d="$delay_us" 'BEGIN { exit !(a1 - a0 >= 0.9 * d && a1 <= a0 + 2 * d) }' ||
    fail "netem: the latency measured under a ${delay_us} us delay ($a1 us) is not about $a0 + $delay_us us"

  # The model's choice per size: under the delay the latency-bound range (tree) must reach sizes that ring took
  # without it, and never the other way round.
  local c0 c1 diff
  c0=$(chosen_algorithms "$work/delay0")
  c1=$(chosen_algorithms "$work/delay1ms")
  diff=$(awk 'NR == FNR { a[$1] = $2; next } ($1 in a) && a[$1] != $2 { print $1, a[$1], $2 }' <(echo "$c0") <(echo "$c1"))
  echo "   algorithm per size without delay: $(tr '\n' ' ' <<<"$c0")"
  echo "   algorithm per size with delay:    $(tr '\n' ' ' <<<"$c1")"
  [ -n "$diff" ] || fail "netem: no all-reduce size changed algorithm under a ${delay_us} us delay"
  if awk '$2 != "Ring" || $3 != "Tree" { bad = 1 } END { exit !bad }' <<<"$diff"; then
    fail "netem: a size changed algorithm the wrong way under the delay: $(tr '\n' ';' <<<"$diff")"
  fi
  echo "ok: under a ${delay_us} us delay the measured latency went from $a0 to $a1 us and these sizes moved from" \
    "ring to tree: $(awk '{ printf "%s%s", sep, $1; sep = ", " }' <<<"$diff") bytes"
}

# Two NICs per host: checks of a run_perf NAME HOSTS NP run with --nics 2 --bytes (and NCCL_SOCKET_IFNAME naming
# both interfaces). Prints each host's byte split.
check_rails() {
  local name=$1 hosts=$2 np=$3 dir=$work/$1 nranks=$(($2 * $3)) r h pid
  for ((r = 0; r < nranks; r++)); do
    h=$((r / np))
    # The rank's process (its init line), and that process's list of Socket devices: both of its host's interfaces.
    pid=$(grep -Eh "^host$h:[0-9]+:[0-9]+ .* rank $r nRanks $nranks " "$dir"/host*.log | head -1 | cut -d: -f2)
    [ -n "$pid" ] || fail "$name: no init line of rank $r"
    grep -Eqh "^host$h:$pid:.*NET/Socket : Using \[0\][a-z]+[0-9]+h$h:10\.201\.0\.$((h + 1))[^ ]* \[1\][a-z]+[0-9]+n$h:10\.201\.1\.$((h + 1))" \
      "$dir"/host*.log ||
      { cat "$dir.out"; fail "$name: rank $r (pid $pid on host$h) does not list its host's two interfaces as Socket devices"; }
  done
  local d
  for d in 0 1; do
    grep -qh "via NET/Socket/$d\b" "$dir"/host*.log ||
      { cat "$dir.out"; fail "$name: no connection via NET/Socket/$d"; }
  done
  # Each interface of each host sent at least 20% of what the host sent.
  local split="" line
  for ((h = 0; h < hosts; h++)); do
    [ -s "$dir/host$h.bytes" ] || fail "$name: no byte counters of host$h"
    line=$(awk -v h="$h" '{ n[NR] = $1; tx[NR] = $2; t += $2 }
      END { if (NR != 2 || t <= 0) { print "bad"; exit }
            printf "host%d %s %.1f MB (%.0f%%) / %s %.1f MB (%.0f%%)", h, n[1], tx[1] / 1e6, 100 * tx[1] / t, n[2],
              tx[2] / 1e6, 100 * tx[2] / t
            if (tx[1] < 0.2 * t || tx[2] < 0.2 * t) printf " UNDER 20%%" }' "$dir/host$h.bytes")
    case $line in
      bad) fail "$name: host$h's byte counters are not two interfaces with bytes sent: $(cat "$dir/host$h.bytes")" ;;
      *UNDER*) fail "$name: an interface sent less than 20% of the bytes: $line" ;;
    esac
    split+="${split:+; }$line"
  done
  echo "   ok: every rank lists 2 Socket devices, connections via NET/Socket/0 and /1; sent: $split"
}

# 2 hosts x 2 ranks, two NICs per host, both named in NCCL_SOCKET_IFNAME, two channels: data must spread over both.
mode_rails() {
  local rails=(--nics 2 --bytes --env "NCCL_SOCKET_IFNAME=={ifname},{ifname2}" --env BRAID_CPU_NCHANNELS=2)
  run_perf rails_ar 2 2 8 "${rails[@]}" -- all_reduce_perf -b 8 -e 16M -f 8 -c 1 -n 2 -w 1  # 8 B .. 16 MB
  check_rails rails_ar 2 2
  run_perf rails_a2a 2 2 6 "${rails[@]}" -- alltoall_perf "${short[@]}"
  check_rails rails_a2a 2 2
}

# ---------------------------------------------------------------------------------------------------------------
# Host 1 sends SIG to its braidrun's children once host 0 has printed two rows of an endless sweep. With STOP (a
# hung host) it waits for host 0 to finish, then kills them.
write_host_cmd() {
  cat >"$work/host_cmd.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
build=$1 sig=$2
"$build/tools/braidrun/braidrun" -np 2 --nnodes "$NNODES" --node-rank "$NODE_RANK" -- \
  "$build/perf/all_reduce_perf" -b 64K -e 64K -n 20 -w 1 -c 0 -N 0 &
br=$!
if [ "$NODE_RANK" = 1 ]; then
  for _ in $(seq 300); do
    [ "$(grep -c '^ *65536 ' "$BRAID_NETNS_LOGDIR/host0.log" 2>/dev/null || true)" -ge 2 ] && break
    sleep 0.1
  done
  read -r -a kids <"/proc/$br/task/$br/children" || true  # the list has no newline
  [ ${#kids[@]} -eq 2 ] || { echo "test: braidrun has ${#kids[@]} children, not 2"; exit 3; }
  date +%s.%N >"$BRAID_NETNS_LOGDIR/killed_at"
  echo "test: SIG$sig to ranks' pids ${kids[*]}"
  kill "-$sig" "${kids[@]}"
  if [ "$sig" = STOP ]; then
    for _ in $(seq 600); do
      [ -e "$BRAID_NETNS_LOGDIR/host0.rc" ] && break
      sleep 0.1
    done
    kill -KILL "${kids[@]}"
  fi
fi
wait "$br"
EOF
  chmod +x "$work/host_cmd.sh"
}

# The kill: host 0's ranks see their peers' processes gone (or their connections closed) at once.
mode_kill() {
  local bound=$((5 + 10))
  write_host_cmd
  local dir=$work/kill rc=0
  BRAID_TIMEOUT=5 "$netns" run -H 2 --timeout 60 --log-dir "$dir" -- "$work/host_cmd.sh" "$build" KILL \
    >"$dir.out" 2>&1 || rc=$?
  cat "$dir.out"
  [ "$rc" != 0 ] || fail "kill: the harness succeeded although host 1's ranks were killed"
  [ -e "$dir/killed_at" ] || fail "kill: host 1 never killed its ranks"
  [ "$(cat "$dir/host1.rc")" = 137 ] || fail "kill: host 1's braidrun should exit 137 (SIGKILL), got $(cat "$dir/host1.rc")"
  grep -Eq "braidrun \(node 1\): rank [23] \(pid [0-9]+\) killed by signal SIGKILL" "$dir/host1.log" ||
    fail "kill: host 1's braidrun did not name the killed rank"
  local rc0
  rc0=$(cat "$dir/host0.rc")
  [ "$rc0" != 0 ] || fail "kill: host 0's ranks exited 0 although their peers died"
  # The first of host 0's ranks to notice fails naming a dead rank of host 1 (and its host, when the error can);
  # host 0's braidrun then reports it and stops its other rank.
  grep -Eq "rank [01]: .*(failed|error).*rank [23]\b" "$dir/host0.log" ||
    fail "kill: no error on host 0 names rank 2 or 3"
  grep -Eq "braidrun \(node 0\): rank [01] \(pid [0-9]+\) exited with status [1-9]" "$dir/host0.log" ||
    fail "kill: host 0's braidrun did not report its failed rank"
  local took
  took=$(awk -v a="$(cat "$dir/killed_at")" -v b="$(cat "$dir/host0.end")" 'BEGIN { printf "%.1f", b - a }')
  awk -v t="$took" -v b="$bound" 'BEGIN { exit !(t <= b) }' ||
    fail "kill: host 0 took $took s after the kill to exit (bound $bound s with BRAID_TIMEOUT=5)"
  echo "ok: host 0 exited with status $rc0 $took s after host 1's ranks were killed (bound $bound s)"
}

# A hung host (its ranks stopped, connections open): host 0's ranks must give up after BRAID_TIMEOUT=5 s without
# progress, naming the rank they waited for, and not much later.
mode_hang() {
  local timeout=5 lo=4 hi=$((5 + 10))
  write_host_cmd
  local dir=$work/hang rc=0
  BRAID_TIMEOUT=$timeout "$netns" run -H 2 --timeout 60 --log-dir "$dir" -- "$work/host_cmd.sh" "$build" STOP \
    >"$dir.out" 2>&1 || rc=$?
  cat "$dir.out"
  [ -e "$dir/killed_at" ] || fail "hang: host 1 never stopped its ranks"
  local rc0
  rc0=$(cat "$dir/host0.rc")
  [ "$rc0" != 0 ] || fail "hang: host 0's ranks exited 0 although their peers hung"
  # The first rank to time out names the peer it waited for: in a ring that may be a healthy rank of host 0 that
  # itself waits for host 1 (rank 1 waits for rank 0, which waits for rank 3).
  grep -Eq "rank [01]: .*(rank [0-3]|host[01]).*BRAID_TIMEOUT" "$dir/host0.log" ||
    fail "hang: no error on host 0 names the rank it waited for and BRAID_TIMEOUT"
  local took
  took=$(awk -v a="$(cat "$dir/killed_at")" -v b="$(cat "$dir/host0.end")" 'BEGIN { printf "%.1f", b - a }')
  awk -v t="$took" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(t >= lo && t <= hi) }' ||
    fail "hang: host 0 exited $took s after host 1 hung; expected $lo-$hi s with BRAID_TIMEOUT=$timeout"
  echo "ok: host 0 gave up $took s after host 1 hung (BRAID_TIMEOUT=$timeout), naming the rank it waited for"
}

# ---------------------------------------------------------------------------------------------------------------
# This test's namespaces and their hosts files (/etc/netns/<ns>/hosts).
ours() {
  ip netns list | awk '{print $1}' | grep -E "^brdc[0-9]+-" || true
  find /etc/netns -maxdepth 1 -name 'brdc*' 2>/dev/null || true
}
ns_has() {  # grep -q on a pipe could SIGPIPE `ip` and fail under pipefail
  local list
  list=$(ip netns list)
  grep -q "$1" <<<"$list"
}
marker_alive() { pgrep -f "^sleep $1\$" >/dev/null; }
markers_on_both() { [ "$(pgrep -cf "^sleep $1\$")" -ge 2 ]; }  # both hosts of a 2-host run
switch_alive() { pgrep -f "tun_delay .*--host brdc$1-h0:" >/dev/null; }  # harness pid
# wait_for CHECK ARG [-not]: waits up to 30 s for CHECK ARG to succeed (with -not: to fail); 1 when it never did.
# Generous: under the full suite on 2 cores a harness can take seconds to start or stop its hosts.
wait_for() {
  local _
  for _ in $(seq 300); do
    if [ "${3:-}" = -not ]; then ! "$1" "$2" && return 0; else "$1" "$2" && return 0; fi
    sleep 0.1
  done
  return 1
}

wait_for_namespaces() {  # harness pid
  local _
  for _ in $(seq 300); do
    ns_has "^brdc$1-h1" && return 0
    sleep 0.1
  done
  fail "cleanup: harness $1 never created its namespaces"
}

mode_cleanup() {
  local before after pid rc marker
  before=$(ours)
  [ -z "$before" ] || "$netns" cleanup --prefix brdc  # leftovers of an earlier killed test run
  before=$(ours)
  [ -z "$before" ] || fail "cleanup: namespaces brdc* exist before the test and belong to a live run: $before"

  # 1. Success and failure.
  "$netns" run --prefix brdc -H 3 -- true || fail "cleanup: a trivial run failed"
  [ -z "$(ours)" ] || fail "cleanup: namespaces left after a successful run: $(ours)"
  rc=0
  "$netns" run --prefix brdc -H 2 -- false || rc=$?
  [ "$rc" = 1 ] || fail "cleanup: a failing command should give status 1, got $rc"
  [ -z "$(ours)" ] || fail "cleanup: namespaces left after a failed run: $(ours)"

  # 2. Timeout: the hard limit kills the hosts' processes and exits 124.
  marker="$((900 + RANDOM % 99)).$$1"
  rc=0
  local t0=$SECONDS
  "$netns" run --prefix brdc --timeout 2 -- sleep "$marker" || rc=$?
  [ "$rc" = 124 ] || fail "cleanup: timeout should give status 124, got $rc"
  [ $((SECONDS - t0)) -le 30 ] || fail "cleanup: --timeout 2 took $((SECONDS - t0)) s"
  [ -z "$(ours)" ] || fail "cleanup: namespaces left after a timeout: $(ours)"
  ! marker_alive "$marker" || fail "cleanup: a host process survived the timeout"

  # 3. SIGTERM and SIGINT to the harness (job control on, so the background harness does not ignore SIGINT).
  local sig expect
  for sig in TERM INT; do
    marker="$((900 + RANDOM % 99)).$$2"
    set -m
    "$netns" run --prefix brdc -H 2 -- sleep "$marker" >/dev/null 2>&1 &
    pid=$!
    set +m
    wait_for_namespaces "$pid"
    # Only once the hosts run their command is the harness in its `wait`: a SIGINT that lands while it runs a
    # foreground `ip` during setup is dropped by bash when that child exits normally (a CI run timed out on it).
    wait_for markers_on_both "$marker" || fail "cleanup: harness $pid never started its hosts' command"
    kill "-$sig" "$pid"
    rc=0
    wait "$pid" || rc=$?
    expect=143
    [ "$sig" = TERM ] || expect=130
    [ "$rc" = "$expect" ] || fail "cleanup: SIG$sig should give status $expect, got $rc"
    [ -z "$(ours)" ] || fail "cleanup: namespaces left after SIG$sig: $(ours)"
    ! marker_alive "$marker" || fail "cleanup: a host process survived SIG$sig to the harness"
  done

  # 4. SIGKILL: nothing can run in the harness, so its namespaces and processes stay (the check can see them)
  #    until `netns.sh cleanup`, which must spare a run that is still alive.
  marker="$((900 + RANDOM % 99)).$$3"
  "$netns" run --prefix brdc -H 2 -- sleep "$marker" >/dev/null 2>&1 &
  pid=$!
  wait_for_namespaces "$pid"
  local live_marker="$((900 + RANDOM % 99)).$$4" live
  "$netns" run --prefix brdc -H 2 --timeout 60 -- sleep "$live_marker" >/dev/null 2>&1 &
  live=$!
  wait_for_namespaces "$live"
  kill -KILL "$pid"
  wait "$pid" || true
  ns_has "^brdc$pid-h0" || fail "cleanup: the SIGKILLed harness's namespaces are already gone?"
  marker_alive "$marker" || fail "cleanup: the SIGKILLed harness's host processes are already gone?"
  "$netns" cleanup --prefix brdc
  ! ns_has "^brdc$pid-" || fail "cleanup: 'netns.sh cleanup' left $(ours)"
  ! marker_alive "$marker" || fail "cleanup: 'netns.sh cleanup' left a host process running"
  ns_has "^brdc$live-h1" || fail "cleanup: 'netns.sh cleanup' removed a live run's namespaces"
  kill -TERM "$live"
  wait "$live" || true

  # 5. A delay by the TUN switch (tools/tun_delay): the switch stops with a harness that got SIGTERM, and with one
  #    that got SIGKILL (PR_SET_PDEATHSIG); `netns.sh cleanup` removes the rest.
  local tool=$build/tools/tun_delay/tun_delay tun=""
  if [ -x "$tool" ] && [ -c /dev/net/tun ]; then
    tun=", the TUN delay switch"
    for sig in TERM KILL; do
      marker="$((900 + RANDOM % 99)).$$5"
      set -m
      "$netns" run --prefix brdc -H 2 --delay 1ms --delay-mode tun --delay-tool "$tool" -- sleep "$marker" \
        >/dev/null 2>&1 &
      pid=$!
      set +m
      wait_for_namespaces "$pid"
      wait_for switch_alive "$pid" || fail "cleanup: harness $pid never started its delay switch"
      kill "-$sig" "$pid"
      wait "$pid" || true
      wait_for switch_alive "$pid" -not || fail "cleanup: the delay switch outlived SIG$sig to the harness"
      [ "$sig" = TERM ] || "$netns" cleanup --prefix brdc
      [ -z "$(ours)" ] || fail "cleanup: namespaces left after SIG$sig to a harness with a delay: $(ours)"
      ! marker_alive "$marker" || fail "cleanup: a host process survived SIG$sig to a harness with a delay"
    done
  fi
  after=$(ours)
  [ -z "$after" ] || fail "cleanup: namespaces left at the end: $after"
  echo "ok: no namespaces or processes left after success, failure, timeout, SIGTERM, SIGINT, SIGKILL + cleanup$tun"
}

case $mode in
  hosts2 | hosts3 | ofi | mpi | kill | hang | cleanup | ifname | netem | rails | tls) "mode_$mode" ;;
  *) fail "unknown mode '$mode'" ;;
esac
