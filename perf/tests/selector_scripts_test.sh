#!/usr/bin/env bash
# perf/calibrate and perf/algo_regret end to end at tiny sizes: the tuning file has a cost line for every
# algorithm x protocol and all-to-all schedule, the library loads it (exact results with it), and the regret
# script prints a table with every forced setting. Timings are not judged (a benchmark, never a test).
set -euo pipefail
build=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$repo/perf/calibrate" --build "$build" --np 2 --max-bytes 4096 --iters 2 --repeat 1 --out "$tmp/tune.txt" \
  >"$tmp/cal.out" 2>&1 || { cat "$tmp/cal.out"; fail "calibrate exited non-zero"; }
for want in "allreduce ring LL 2" "allreduce ring Simple 2" "allreduce tree LL 2" "allreduce tree Simple 2" \
            "allreduce nvls Simple 2" "alltoall pairwise 2" "alltoall bruck 2"; do
  grep -q "^cost $want " "$tmp/tune.txt" || { cat "$tmp/tune.txt"; fail "no 'cost $want' line"; }
done
echo "ok: calibrate wrote every cost line"

for tool in all_reduce_perf alltoall_perf; do
  BRAID_TUNING_FILE="$tmp/tune.txt" "$build/tools/braidrun/braidrun" -np 2 "$build/perf/$tool" -b 8 -e 4096 -f 8 -c 1 \
    -n 2 -w 1 >"$tmp/run.out" 2>&1 || { cat "$tmp/run.out"; fail "$tool with the calibrated file"; }
  grep -q "# Out of bounds values : 0 OK" "$tmp/run.out" || { cat "$tmp/run.out"; fail "$tool: wrong values"; }
done
echo "ok: the calibrated file loads and gives exact results"

"$repo/perf/algo_regret" --build "$build" --np 2 --repeat 1 all_reduce_perf -b 8 -e 64 -f 8 -n 2 -w 1 \
  >"$tmp/regret.out" 2>&1 || { cat "$tmp/regret.out"; fail "algo_regret exited non-zero"; }
for col in ring/LL ring/Simple tree/LL tree/Simple nvls auto regret; do
  grep -q "$col" "$tmp/regret.out" || { cat "$tmp/regret.out"; fail "regret table lacks $col"; }
done
grep -q "# worst regret:" "$tmp/regret.out" || fail "no worst-regret line"
# The choice column comes from the selector's TUNING log: every size row names a forced setting (2 ranks on one
# host choose NVLS-style for these sizes), none is "?".
rows=$(grep -cE '^ +[0-9]+ ' "$tmp/regret.out")
named=$(grep -cE '^ +[0-9]+ .* (ring/LL|ring/Simple|tree/LL|tree/Simple|nvls) +[0-9.]+$' "$tmp/regret.out")
[ "$rows" -gt 0 ] && [ "$rows" = "$named" ] || { cat "$tmp/regret.out"; fail "choice column: $named of $rows rows named"; }
echo "ok: algo_regret prints every forced setting and the selector's choice"
