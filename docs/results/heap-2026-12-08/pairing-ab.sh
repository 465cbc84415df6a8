#!/bin/bash
# Pairing off (0) and on (piece bytes) alternating on one build of pairing-not-kept.patch, whose step engine reads
# BRAID_XPIECE (an experiment's getenv, not kept). Run from the repository root with the patch applied and built.
# usage: pairing-ab.sh ROUNDS NP "values" all_reduce_perf-args...
R=$1; NP=$2; V=$3; shift 3
for r in $(seq "$R"); do for v in $V; do
  echo -n "$v: "
  BRAID_XPIECE=$v build/tools/braidrun/braidrun -np "$NP" env BRAID_XPIECE=$v build/perf/${TOOL:-all_reduce_perf} "$@" 2>&1 | grep -E "^ +[0-9]" | awk '{printf "%s:%s/%s  ", $1, $8, $12}'
  echo
done; done
