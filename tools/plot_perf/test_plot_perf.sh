#!/usr/bin/env bash
# Test of tools/plot_perf/plot_perf and perf/compare_baselines on hand-written JSON (no build, no ranks):
# --csv merges two files, malformed and missing files fail with exit 2 and a message naming the file,
# compare_baselines --dry-run prints the braid, mpi and gloo command lines, and plot_perf writes two PNGs.
# Needs python3; without gnuplot the PNG part is skipped ("SKIP: gnuplot missing", exit 0).
#
# Usage: tools/plot_perf/test_plot_perf.sh
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
plot_perf=$here/plot_perf
compare=$repo/perf/compare_baselines

if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: python3 missing"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# sample FILE LIBRARY_FIELD SCALE: four sizes of a 2-rank float sum; the first time is 0 with null bandwidths, as
# the tools write a non-finite value, so the log axes must leave it out. An empty LIBRARY_FIELD omits the field
# (files from before it existed, read as braid).
sample() {
  local lib=""
  [ -n "$2" ] && lib="\"library\": \"$2\","
  cat >"$1" <<EOF
{"tool": "all_reduce_perf", $lib "nccl_headers": 22809, "nccl_library": 22809,
 "nranks": 2, "nprocs": 2, "nthreads": 1, "ngpus": 1, "options": {"minbytes": 8, "maxbytes": 1048576},
 "results": [
  {"size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1,
   "out_of_place": {"time_us": 0, "algbw_gbps": null, "busbw_gbps": null, "wrong": 0},
   "in_place": {"time_us": 1.5, "algbw_gbps": 0.005, "busbw_gbps": 0.005, "wrong": null}},
  {"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": -1,
   "out_of_place": {"time_us": 2.0, "algbw_gbps": 0.51, "busbw_gbps": $3, "wrong": 0},
   "in_place": {"time_us": 2.0, "algbw_gbps": 0.51, "busbw_gbps": 0.51, "wrong": 0}},
  {"size": 65536, "count": 16384, "type": "float", "redop": "sum", "root": -1,
   "out_of_place": {"time_us": 20.0, "algbw_gbps": 3.2, "busbw_gbps": 3.2, "wrong": 0},
   "in_place": {"time_us": 21.0, "algbw_gbps": 3.1, "busbw_gbps": 3.1, "wrong": 0}},
  {"size": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": -1,
   "out_of_place": {"time_us": 250.0, "algbw_gbps": 4.19, "busbw_gbps": 4.19, "wrong": 0},
   "in_place": {"time_us": 260.0, "algbw_gbps": 4.03, "busbw_gbps": 4.03, "wrong": 0}}],
 "wrong_total": 0, "avg_busbw_gbps": 2.0, "status": "OK"}
EOF
}
sample "$tmp/braid.json" "" 0.5
sample "$tmp/mpi.json" mpi 0.25
printf '{"tool": "all_reduce_perf", "results": [{"size": 8,]}\n' >"$tmp/malformed.json"

# nccl-tests' own -J output (NVIDIA's library, say) beside braid's, and runs told apart by the forced algorithm.
cat >"$tmp/nccl.json" <<'EOF'
{"version": 2, "args": ["all_reduce_perf", "-b", "8", "-e", "1K"], "env": ["NCCL_ALGO=Ring"], "nccl_version": 22809,
 "config": {"nthreads": 1, "ngpus": 2, "devices": [{"rank": 0, "device": 0}]},
 "results": [
  {"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1",
   "out_of_place": {"time": 10.5, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0},
   "in_place": {"time": 10.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0}},
  {"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": "    -1",
   "out_of_place": {"time": 11.0, "alg_bw": 0.09, "bus_bw": 0.09, "nwrong": 0},
   "in_place": {"time": 11.0, "alg_bw": 0.09, "bus_bw": 0.09, "nwrong": 0}}]}
EOF
sed 's/"nranks": 2,/"nranks": 2, "algo": "tree",/' "$tmp/braid.json" >"$tmp/braid-tree.json"
if python3 "$plot_perf" --csv "$tmp/nccl.json" "$tmp/braid-tree.json" >"$tmp/csv" 2>"$tmp/err"; then
  header="size,nccl-tests nranks=2 algo=Ring time_us,nccl-tests nranks=2 algo=Ring busbw_gbps"
  header="$header,braid nranks=2 algo=tree time_us,braid nranks=2 algo=tree busbw_gbps"
  [ "$(head -n 1 "$tmp/csv")" = "$header" ] || fail "nccl-tests JSON --csv header: $(head -n 1 "$tmp/csv")"
  grep -q "^1024,11,0.09,2,0.5$" "$tmp/csv" || fail "nccl-tests JSON --csv 1 KB row: $(grep '^1024' "$tmp/csv")"
else
  fail "--csv of nccl-tests' JSON: $(cat "$tmp/err")"
fi

# --csv: one header naming both runs, one row per size.
if python3 "$plot_perf" --csv "$tmp/braid.json" "$tmp/mpi.json" >"$tmp/csv" 2>"$tmp/err"; then
  header="size,braid nranks=2 time_us,braid nranks=2 busbw_gbps,mpi nranks=2 time_us,mpi nranks=2 busbw_gbps"
  [ "$(head -n 1 "$tmp/csv")" = "$header" ] || fail "--csv header: $(head -n 1 "$tmp/csv")"
  [ "$(wc -l <"$tmp/csv")" -eq 5 ] || fail "--csv: expected 5 lines, got $(wc -l <"$tmp/csv")"
  grep -qx "1024,2,0.5,2,0.25" "$tmp/csv" || fail "--csv: no row '1024,2,0.5,2,0.25'"
else
  fail "--csv exited non-zero: $(cat "$tmp/err")"
fi

# expect_error NAME PATTERN ARGS...: exit status 2, PATTERN on stderr, no Python traceback.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  python3 "$plot_perf" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "$name: exit status $rc, want 2"
  grep -qF -- "$pattern" "$tmp/err" || fail "$name: stderr lacks '$pattern': $(cat "$tmp/err")"
  if grep -q Traceback "$tmp/err"; then fail "$name: traceback on stderr"; fi
}
expect_error "malformed file" "$tmp/malformed.json: malformed JSON" --csv "$tmp/braid.json" "$tmp/malformed.json"
expect_error "missing file" "$tmp/missing.json: no such file" --csv "$tmp/missing.json"

# compare_baselines --dry-run: the three runs, each with its -J file.
b=$tmp/build
j=$tmp/json
if python3 "$compare" --dry-run --np 2 --build "$b" --json-dir "$j" all_reduce_perf -b 8 -e 1M -c 1 \
  >"$tmp/dry" 2>"$tmp/err"; then
  for want in \
    "$b/tools/braidrun/braidrun -np 2 -- $b/perf/all_reduce_perf -b 8 -e 1M -c 1 -J $j/all_reduce_perf-braid-np2.json" \
    "mpirun -np 2 --oversubscribe --bind-to none" \
    "$b/perf/all_reduce_perf --baseline mpi -b 8 -e 1M -c 1 -J $j/all_reduce_perf-mpi-np2.json" \
    "$b/tools/braidrun/braidrun -np 2 -- $b/perf/all_reduce_perf --baseline gloo -b 8 -e 1M -c 1 -J $j/all_reduce_perf-gloo-np2.json"; do
    grep -qF -- "$want" "$tmp/dry" || fail "--dry-run lacks: $want"
  done
  [ "$(wc -l <"$tmp/dry")" -eq 3 ] || fail "--dry-run: expected 3 lines, got: $(cat "$tmp/dry")"
  [ -e "$j" ] && fail "--dry-run created $j"
else
  fail "compare_baselines --dry-run exited non-zero: $(cat "$tmp/err")"
fi

# --rounds: the libraries alternate round by round, each run with a -J file of its own.
if python3 "$compare" --dry-run --rounds 2 --np 2 --libs braid,mpi --build "$b" --json-dir "$j" all_reduce_perf \
  -b 8 >"$tmp/dry2" 2>"$tmp/err"; then
  [ "$(wc -l <"$tmp/dry2")" -eq 4 ] || fail "--dry-run --rounds 2: expected 4 lines, got: $(cat "$tmp/dry2")"
  order=$(sed -E 's/.*-J [^ ]*all_reduce_perf-([a-z]+)-np2-(r[0-9])\.json.*/\1-\2/' "$tmp/dry2" | tr '\n' ' ')
  [ "$order" = "braid-r1 mpi-r1 braid-r2 mpi-r2 " ] || fail "--dry-run --rounds 2: order $order"
else
  fail "compare_baselines --dry-run --rounds 2 exited non-zero: $(cat "$tmp/err")"
fi

# --rounds on real runs of a stand-in braidrun, whose three runs take 3, 1 and 2 us at 1 KB (and 300, 100, 200 us
# at 1 MB): the time table shows 1.00 / 2.00 / 3.00, and the bandwidth table the median run's.
fake=$tmp/fakebuild
mkdir -p "$fake/tools/braidrun" "$fake/perf"
printf '#!/bin/sh\nexit 0\n' >"$fake/perf/all_reduce_perf"
cat >"$fake/tools/braidrun/braidrun" <<FAKE
#!/usr/bin/env bash
n=\$(cat "$tmp/round" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >"$tmp/round"
t=\$(echo "3 1 2" | cut -d' ' -f\$n)
while [ \$# -gt 0 ]; do [ "\$1" = -J ] && out=\$2; shift; done
cat >"\$out" <<JSON
{"tool": "all_reduce_perf", "library": "braid", "nranks": 2, "results": [
 {"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": -1,
  "out_of_place": {"time_us": \$t, "algbw_gbps": 0.5, "busbw_gbps": 0.\$t, "wrong": 0},
  "in_place": {"time_us": \$t, "algbw_gbps": 0.5, "busbw_gbps": 0.5, "wrong": 0}},
 {"size": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": -1,
  "out_of_place": {"time_us": \${t}00, "algbw_gbps": 4, "busbw_gbps": \$t.5, "wrong": 0},
  "in_place": {"time_us": \${t}00, "algbw_gbps": 4, "busbw_gbps": 4, "wrong": 0}}]}
JSON
FAKE
chmod +x "$fake/tools/braidrun/braidrun" "$fake/perf/all_reduce_perf"
if python3 "$compare" --rounds 3 --libs braid --build "$fake" --json-dir "$tmp/j3" all_reduce_perf -b 8 \
  >"$tmp/r3" 2>"$tmp/err"; then
  grep -qE '^ +1024 +1\.00 / +2\.00 / +3\.00$' "$tmp/r3" || fail "--rounds 3: no 1 KB time spread in: $(cat "$tmp/r3")"
  grep -qE '^ +1048576 +100\.00 /200\.00 /300\.00$' "$tmp/r3" || fail "--rounds 3: no 1 MB time spread: $(cat "$tmp/r3")"
  grep -qE '^ +1024 +0\.2$' "$tmp/r3" || fail "--rounds 3: the 1 KB bandwidth is not the median run's: $(cat "$tmp/r3")"
  grep -qF "median of 3 runs" "$tmp/r3" || fail "--rounds 3: the bandwidth table does not say it holds medians"
  [ "$(ls "$tmp/j3" | wc -l)" -eq 3 ] || fail "--rounds 3: expected 3 JSON files, got: $(ls "$tmp/j3")"
else
  fail "compare_baselines --rounds 3 exited non-zero: $(cat "$tmp/err") $(cat "$tmp/r3")"
fi

if ! command -v gnuplot >/dev/null 2>&1; then
  if [ "$failures" -ne 0 ]; then
    echo "test_plot_perf: $failures failure(s)"
    exit 1
  fi
  echo "SKIP: gnuplot missing (the CSV and dry-run checks passed)"
  exit 0
fi

# Both PNGs, by their 8-byte signature.
if python3 "$plot_perf" -o "$tmp/out" --title "test" "$tmp/braid.json" "$tmp/mpi.json" >"$tmp/log" 2>&1; then
  for png in "$tmp/out-busbw.png" "$tmp/out-time.png"; do
    magic=$(head -c 8 "$png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
    [ "$magic" = "89504e470d0a1a0a" ] || fail "$(basename "$png") is not a PNG (starts with '$magic')"
  done
else
  fail "plot_perf exited non-zero: $(cat "$tmp/log")"
fi

if [ "$failures" -ne 0 ]; then
  echo "test_plot_perf: $failures failure(s)"
  exit 1
fi
echo "test_plot_perf: all passed"
