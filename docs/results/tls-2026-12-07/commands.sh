#!/bin/bash
# Plain TCP vs TLS (BRAID_ENCRYPTION_KEY_FILE) on the Socket network: 2 hosts (network namespaces on this machine,
# veth pairs through a bridge) x 1 rank, all_reduce_perf 8 B .. 64 MB, 3 rounds, the two alternating.
# Prints: mode round bytes time_us busbw_GBps (out of place).
cd /work/main
key=$(mktemp); (umask 077 && head -c 48 /dev/urandom | base64 -w0 >"$key")
for round in 1 2 3; do
  for mode in plain tls; do
    env=(); [ $mode = tls ] && env=(env "BRAID_ENCRYPTION_KEY_FILE=$key")
    log=$(mktemp -d)
    bash tests/multihost/netns.sh run -H 2 --timeout 300 --log-dir "$log" -- "${env[@]}" build/tools/braidrun/braidrun \
      -np 1 --nnodes "{nhosts}" --node-rank "{host}" --master-addr "{master}" --master-port "{port}" -- \
      build/perf/all_reduce_perf -b 8 -e 64M -f 8 -n 20 -w 5 -c 1 >/dev/null 2>&1
    awk -v m=$mode -v r=$round '/^ *[0-9]+ +[0-9]+ +float/ {print m, r, $1, $6, $8}' "$log/host0.log"
    rm -rf "$log"
  done
done
rm -f "$key"
