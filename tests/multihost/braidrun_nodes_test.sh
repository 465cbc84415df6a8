#!/usr/bin/env bash
# braidrun's multi-node options on one host, no root needed: the rank variables each node's children get, the
# defaults from MASTER_ADDR/MASTER_PORT/NODE_RANK, refused combinations, and a 2-node x 2-rank all-reduce whose two
# braidruns meet at one master address (both "nodes" are this host, so shared memory carries it).
#
#   braidrun_nodes_test.sh BUILD_DIR
set -euo pipefail

build=$(cd "${1:?usage: braidrun_nodes_test.sh BUILD_DIR}" && pwd)
braidrun=$build/tools/braidrun/braidrun
work=$(mktemp -d /tmp/braid-braidrun-nodes.XXXXXX)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# shellcheck disable=SC2016 # expanded by the children's shell
show='echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT"'

# 1. Node 2 of 3, two ranks each: global ranks 4 and 5 of 6.
out=$("$braidrun" -np 2 --nnodes 3 --node-rank 2 --master-addr 10.1.2.3 --master-port 4567 -- sh -c "$show" | sort)
expected=$'4 6 0 2 2 10.1.2.3 4567\n5 6 1 2 2 10.1.2.3 4567'
[ "$out" = "$expected" ] || fail "node 2 of 3: got '$out', expected '$expected'"

# torchrun's spellings.
out=$("$braidrun" --nproc_per_node=1 --nnodes=2 --node_rank=1 --master_addr=h0 --master_port=99 -- sh -c "$show")
[ "$out" = "1 2 0 1 1 h0 99" ] || fail "torchrun spellings: got '$out'"

# 2. Defaults from the environment across nodes; NODE_RANK is ignored on one node.
out=$(MASTER_ADDR=10.9.9.9 MASTER_PORT=2345 NODE_RANK=1 "$braidrun" -np 1 --nnodes 2 -- sh -c "$show")
[ "$out" = "1 2 0 1 1 10.9.9.9 2345" ] || fail "environment defaults: got '$out'"
out=$(NODE_RANK=3 "$braidrun" -np 1 -- sh -c "$show")
[[ $out == "0 1 0 1 0 127.0.0.1 "* ]] || fail "one node should ignore NODE_RANK: got '$out'"

# On one node the port braidrun picks lies outside the kernel's ephemeral range: one from inside it (bind to 0 and
# release) could be taken by any outgoing connection before rank 0 binds it, which CI saw as EADDRINUSE.
read -r eph_lo eph_hi < /proc/sys/net/ipv4/ip_local_port_range
for _ in 1 2 3 4 5; do
  port=$("$braidrun" -np 1 -- sh -c 'echo "$MASTER_PORT"')
  [[ $port =~ ^[0-9]+$ ]] || fail "one node: MASTER_PORT '$port' is not a number"
  if [ "$port" -ge "$eph_lo" ] && [ "$port" -le "$eph_hi" ]; then
    fail "one node: MASTER_PORT $port lies in the ephemeral range $eph_lo-$eph_hi"
  fi
done

# 3. Refused: no rendezvous across nodes, a node rank out of range.
expect_refusal() {  # pattern args...
  local pattern=$1 rc=0
  shift
  env -u MASTER_ADDR -u MASTER_PORT -u NODE_RANK "$braidrun" "$@" -- true 2>"$work/err" || rc=$?
  [ "$rc" = 2 ] || fail "braidrun $* should exit 2, got $rc"
  grep -q -- "$pattern" "$work/err" || fail "braidrun $*: message lacks '$pattern': $(cat "$work/err")"
}
expect_refusal "needs --master-addr" -np 1 --nnodes 2 --node-rank 0 --master-port 1
expect_refusal "needs --master-port" -np 1 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1
expect_refusal "is not below --nnodes 2" -np 1 --nnodes 2 --node-rank 2 --master-addr 127.0.0.1 --master-port 1
"$braidrun" --help | grep -q -- "--node-rank" || fail "--help does not document --node-rank"

# 4. Two braidruns, one per "node", meet at 127.0.0.1: ranks 0-1 and 2-3 of one 4-rank all-reduce.
port=$((20000 + $$ % 20000))
pids=()
for node in 0 1; do
  BRAID_TIMEOUT=30 "$braidrun" -np 2 --nnodes 2 --node-rank "$node" --master-addr 127.0.0.1 --master-port "$port" -- \
    "$build/perf/all_reduce_perf" -b 8 -e 64K -f 8 -c 1 -n 2 -w 1 >"$work/node$node.log" 2>&1 &
  pids+=($!)
done
for node in 0 1; do
  rc=0
  wait "${pids[$node]}" || rc=$?
  [ "$rc" = 0 ] || { cat "$work"/node*.log; fail "node $node's braidrun exited with status $rc"; }
done
grep -Eq "Rank +3 Group +0 Pid" "$work/node0.log" || { cat "$work/node0.log"; fail "rank 0 did not see 4 ranks"; }
rows=$(awk '/^ *[0-9]+ +[0-9]+ +float /' "$work/node0.log")
[ "$(printf '%s\n' "$rows" | grep -c .)" = 5 ] || { cat "$work/node0.log"; fail "expected 5 table rows"; }
printf '%s\n' "$rows" | awk '$9 != "0" || $13 != "0" { bad = 1 } END { exit bad }' || fail "#wrong is not 0"
echo "ok: braidrun --nnodes/--node-rank rank mapping, defaults, refusals, a 2-node x 2-rank all-reduce"
