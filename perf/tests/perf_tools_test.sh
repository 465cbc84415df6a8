#!/usr/bin/env bash
# Tests of the perf tools, by running them: every <coll>_perf at 1, 2 and 4 ranks, the flags, and the MPI and Gloo
# baselines when the build has them. Each run must exit as expected and print one nccl-tests table with the
# expected number of data rows, 0 in every checked #wrong column (N/A only where the tool defines no in-place
# result) and nccl-tests' footer.
#
# Usage: perf/tests/perf_tools_test.sh BUILD_DIR braid|flags|braidrun|gloo|mpi|devicebufs|fakedriver
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR braid|flags|braidrun|gloo|mpi|devicebufs|fakedriver" >&2
  exit 2
fi
build=$1
mode=$2
perfdir=$build/perf
braidrun=$build/tools/braidrun/braidrun
tools="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv gather scatter"
for t in $tools; do
  if [ ! -x "$perfdir/${t}_perf" ]; then
    echo "FAIL: $perfdir/${t}_perf not built" >&2
    exit 1
  fi
done

timeout_s=${PERF_TEST_TIMEOUT:-180}
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
err=$tmp/err

# rows_for MIN MAX FACTOR: how many sizes the sweep visits.
rows_for() {
  local s=$1 n=0
  while [ "$s" -le "$2" ]; do
    n=$((n + 1))
    s=$((s * $3))
  done
  echo "$n"
}

report() {  # report NAME PROBLEMS RC
  if [ -n "$2" ]; then
    echo "FAIL: $1: exit status $3; $2"
    sed 's/^/    out: /' "$out" | tail -n 40
    sed 's/^/    err: /' "$err" | tail -n 20
    failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}

# check NAME TOOL EXPECTED_ROWS WANT_RC COMMAND...: runs COMMAND and checks its table. WANT_RC 1 expects wrong values
# (#wrong > 0 somewhere and the FAILED footer).
check() {
  local name=$1 tool=$2 expected=$3 want_rc=$4
  shift 4
  timeout "$timeout_s" "$@" >"$out" 2>"$err"
  local rc=$?
  local na_ok=0
  [ "$tool" = sendrecv_perf ] && na_ok=1
  local problems
  problems=$(awk -v expected="$expected" -v tool="$tool" -v want="$want_rc" -v na_ok="$na_ok" '
    /^#/ {
      if ($0 ~ /^# Out of bounds values : 0 OK$/) footer_ok = 1
      if ($0 ~ /^# Out of bounds values : [1-9][0-9]* FAILED$/) footer_failed = 1
      if ($0 == "# Collective test concluded: " tool) concluded = 1
      if ($0 == "# Collective test starting: " tool) headers++
      if ($0 ~ /^#       size         count      type   redop    root  (   time|cputime)   algbw   busbw  #wrong/) tables++
      next
    }
    NF == 13 && $1 ~ /^[0-9]+$/ {
      rows++
      if ($9 != "0") wrong++
      if ($13 != "0" && !(na_ok && $13 == "N/A")) wrong++
      next
    }
    { other++ }
    END {
      if (rows != expected) printf "expected %d data rows, got %d; ", expected, rows
      if (want == 0 && wrong) printf "%d #wrong cells != 0; ", wrong
      if (want == 0 && !footer_ok) printf "no \"# Out of bounds values : 0 OK\"; "
      if (want == 1 && (!wrong || !footer_failed)) printf "wrong values were not reported; "
      if (!concluded) printf "no \"# Collective test concluded: %s\"; ", tool
      if (headers != 1 || tables != 1) printf "%d headers and %d tables (want 1 each); ", headers, tables
      if (other) printf "%d unexpected output lines; ", other
    }' "$out")
  if [ "$rc" -ne "$want_rc" ]; then problems="exit status $rc, want $want_rc; $problems"; fi
  report "$name" "$problems" "$rc"
}

# refuse NAME PATTERN COMMAND...: COMMAND must exit with status 2 and print PATTERN (a grep -E) on stderr.
refuse() {
  local name=$1 pattern=$2
  shift 2
  timeout "$timeout_s" "$@" >"$out" 2>"$err"
  local rc=$?
  local problems=""
  [ "$rc" -eq 2 ] || problems="exit status $rc, want 2; "
  grep -Eq -- "$pattern" "$err" || problems="${problems}stderr lacks /$pattern/; "
  report "$name" "$problems" "$rc"
}

launcher() {  # launcher NP: sets L to the prefix that starts NP ranks as processes (braidrun; none for 1)
  if [ "$1" -eq 1 ]; then L=(); else L=("$braidrun" -np "$1" --); fi
}

args=(-b 8 -e 1M -f 32 -c 1 -n 2 -w 1)
L2=("$braidrun" -np 2 --)
rows=$(rows_for 8 1048576 32)

case "$mode" in
  braid)
    for t in $tools; do
      for np in 1 2 4; do
        launcher "$np"
        check "${t}_perf, $np ranks" "${t}_perf" "$rows" 0 "${L[@]}" "$perfdir/${t}_perf" "${args[@]}" -r $((np - 1))
      done
    done
    # Each algorithm forced (NCCL_ALGO), across processes on ncclMemAlloc buffers: exact either way.
    for algo in ring nvls; do
      for t in all_reduce reduce_scatter all_gather; do
        check "${t}_perf NCCL_ALGO=$algo, 3 ranks" "${t}_perf" "$rows" 0 env NCCL_ALGO=$algo \
          "$braidrun" -np 3 -- "$perfdir/${t}_perf" "${args[@]}"
      done
    done
    # Ranks as threads (-t) and several ranks per thread in one group (-g), across processes.
    check "all_reduce_perf -t 2 x 2 processes" all_reduce_perf "$rows" 0 "${L2[@]}" "$perfdir/all_reduce_perf" "${args[@]}" -t 2
    check "alltoall_perf -g 2 x 2 processes" alltoall_perf "$rows" 0 "${L2[@]}" "$perfdir/alltoall_perf" "${args[@]}" -g 2
    check "reduce_scatter_perf -t 2 -g 2" reduce_scatter_perf "$rows" 0 "$perfdir/reduce_scatter_perf" "${args[@]}" -t 2 -g 2
    # Every datatype and op (fp8 included), 3 ranks: 12 types x 5 ops x sizes.
    check "all types and ops (mulsum too), -t 3" all_reduce_perf $((12 * 6 * $(rows_for 8 4096 8))) 0 \
      "$perfdir/all_reduce_perf" -b 8 -e 4K -f 8 -c 1 -n 1 -w 0 -d all -o all -t 3
    check "reduce_perf mulsum, 4 ranks" reduce_perf "$rows" 0 "${L2[@]}" "$perfdir/reduce_perf" "${args[@]}" -t 2 -o mulsum -r 3
    check "reduce_scatter all types, -t 3" reduce_scatter_perf $((12 * $(rows_for 96 4096 8))) 0 \
      "$perfdir/reduce_scatter_perf" -b 96 -e 4K -f 8 -c 1 -n 1 -w 0 -d all -o avg -t 3
    ;;
  flags)
    p=$perfdir/all_reduce_perf
    check "-N 2 repeats the sweep" all_reduce_perf $((2 * rows)) 0 "$p" "${args[@]}" -t 2 -N 2
    check "-m 3 aggregates" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -m 3
    check "-z 1 barrier per op" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -z 1
    check "-z 3 barrier per iteration" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -z 3
    check "-u 1 -a 3" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -u 1 -a 3
    check "-i additive step" all_reduce_perf 4 0 "$p" -b 1K -e 4K -i 1K -c 1 -n 1 -t 2
    timeout "$timeout_s" "$p" -b 1K -e 1K -c 0 -n 1 -t 2 >"$out" 2>"$err"
    rc=$?
    problems=""
    [ "$rc" -eq 0 ] || problems="exit status $rc; "
    grep -Eq '^ +1024 +256 +float +sum +-1 .* N/A .* N/A$' "$out" || problems="${problems}no row with #wrong N/A"
    report "-c 0: #wrong N/A" "$problems" "$rc"
    # An injected wrong value (test hook) must be counted and give exit status 1.
    check "wrong values give exit status 1" all_reduce_perf "$rows" 1 env BRAID_PERF_INJECT_WRONG=1 "$p" "${args[@]}" -t 2
    # NCCL_TESTS_MIN_BW: the average is marked, and missing it is exit status 1.
    check "NCCL_TESTS_MIN_BW met" all_reduce_perf "$rows" 0 env NCCL_TESTS_MIN_BW=0.000001 "$p" "${args[@]}" -t 2
    grep -Eq "^# Avg bus bandwidth    : [0-9.e+-]+ OK$" "$out" || report "NCCL_TESTS_MIN_BW met says OK" "no OK" 1
    timeout "$timeout_s" env NCCL_TESTS_MIN_BW=1000000 "$p" "${args[@]}" -t 2 >"$out" 2>"$err"
    rc=$?
    problems=""
    [ "$rc" -eq 1 ] || problems="exit status $rc, want 1; "
    grep -Eq "^# Avg bus bandwidth    : [0-9.e+-]+ FAILED$" "$out" || problems="${problems}no FAILED mark; "
    grep -q "below 0.9 x NCCL_TESTS_MIN_BW" "$err" || problems="${problems}no message; "
    report "NCCL_TESTS_MIN_BW missed" "$problems" "$rc"
    # JSON output parses and carries every row.
    check "-J writes JSON" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -J "$tmp/r.json"
    if command -v python3 >/dev/null; then
      python3 - "$tmp/r.json" "$rows" <<'PY' || report "-J content" "bad JSON" 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "all_reduce_perf" and d["library"] == "braid" and d["nranks"] == 2, d
assert len(d["results"]) == int(sys.argv[2]) and d["status"] == "OK" and d["wrong_total"] == 0
assert all(r["out_of_place"]["wrong"] == 0 and r["in_place"]["time_us"] > 0 for r in d["results"])
PY
    fi
    check "-R 1 registers the buffers" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -R 1
    check "-R 2 registers symmetric windows" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -R 2
    check "-R 2 with -g 2 (one thread registers two ranks' windows)" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -g 2 -R 2
    refuse "-R 3 refused" "registration mode \(-R\)" "$p" -R 3
    refuse "unknown baseline" "--baseline 'bogus' is unknown" "$p" --baseline bogus
    refuse "unknown datatype" "invalid datatype \(-d\) 'float17'" "$p" -d float17
    refuse "root out of range" "root 3 \(-r\) is not a rank below 2" "$perfdir/broadcast_perf" -t 2 -r 3
    refuse "bad size" "invalid size \(-b\) '12Q'" "$p" -b 12Q
    # nccl-tests' shapes: per-rank blocks are whole 16-byte lines, so size and count match its table.
    timeout "$timeout_s" "$perfdir/gather_perf" -b 1M -e 1M -t 3 -n 1 -w 0 -c 1 >"$out" 2>"$err"
    grep -Eq "^ +1048560 +87380 +float +none +0 " "$out" || report "gather sizes round to 16-byte blocks" "no 1048560 87380 row" 1
    timeout "$timeout_s" "$perfdir/all_gather_perf" -d int8 -b 48 -e 48 -t 2 -n 1 -w 0 -c 1 >"$out" 2>"$err"
    grep -Eq "^ +32 +16 +int8 +none +-1 " "$out" || report "all_gather int8 rounds to 16 elements" "no 32 16 row" 1
    # -r -1: every root in turn; fractional sizes.
    check "-r -1 sweeps the roots" broadcast_perf $((3 * rows)) 0 "$perfdir/broadcast_perf" "${args[@]}" -t 3 -r -1
    [ "$(awk '/^ +[0-9]/ {print $5}' "$out" | sort -u | tr '\n' ' ')" = "0 1 2 " ] ||
      report "-r -1 names each root" "root column: $(awk '/^ +[0-9]/ {print $5}' "$out" | sort -u | tr '\n' ' ')" 1
    check "-b 1.5K" all_reduce_perf 1 0 "$p" -b 1.5K -e 1.5K -c 1 -n 1 -t 2
    grep -Eq "^ +1536 +384 " "$out" || report "-b 1.5K is 1536 bytes" "no 1536 row" 1
    refuse "-b 1.5e3 is 1500 bytes and -e .5K 512" "minimum size 1500 \(-b\) is larger than maximum size 512 \(-e\)" \
      "$p" -b 1.5e3 -e .5K
    # MASTER_PORT matters only where it is used: one process ignores it, a launcher's rendezvous names it.
    check "a bad MASTER_PORT unused" all_reduce_perf "$rows" 0 env MASTER_PORT=abc "$p" "${args[@]}"
    refuse "a bad MASTER_PORT used" "MASTER_PORT='abc' is not a port number" env MASTER_PORT=abc RANK=0 WORLD_SIZE=1 \
      "$p" -b 8 -e 8
    # send/receive names the op, and -o all runs it once per op, as nccl-tests does.
    check "sendrecv_perf -o all" sendrecv_perf $((6 * rows)) 0 "$perfdir/sendrecv_perf" "${args[@]}" -t 2 -o all
    grep -Eq "^ +8 +2 +float +sum +-1 " "$out" || report "sendrecv redop column" "no 'sum' in the redop column" 1
    # The footer counts failed checks (the first failing check iteration of each result), not elements.
    check "-c 3 with one wrong element per check" all_reduce_perf 2 1 env BRAID_PERF_INJECT_WRONG=1 "$p" -b 8 -e 16 -f 2 \
      -c 3 -n 1 -t 2
    problems=""
    grep -q "^# Out of bounds values : 4 FAILED$" "$out" || problems="footer: $(grep 'Out of bounds' "$out"); "
    [ "$(awk '/^ +[0-9]/ {print $9, $13}' "$out" | sort -u | tr '\n' ' ')" = "1 1 " ] ||
      problems="${problems}#wrong cells: $(awk '/^ +[0-9]/ {print $9, $13}' "$out" | tr '\n' ' '); "
    report "Out of bounds values counts failed checks" "$problems" 1
    # nccl-tests pads its header lines; a plain diff of the two tables needs the same blanks.
    timeout "$timeout_s" "$p" -b 8 -e 8 -n 1 >"$out" 2>"$err"
    problems=""
    grep -q "in-place          $" "$out" || problems="first header line not padded; "
    grep -q "#wrong $" "$out" || problems="${problems}second header line not padded; "
    grep -Eq "^# Avg bus bandwidth    : [0-9.e+-]+ $" "$out" || problems="${problems}Avg line without its blank; "
    report "header padding as nccl-tests" "$problems" 0
    refuse "NCCL_TESTS_SPLIT named as not implemented" "NCCL_TESTS_SPLIT=MOD 2: running one test per group" \
      env NCCL_TESTS_SPLIT="MOD 2" "$p" -b 8 -e 8
    refuse "-M named as not implemented" "-M \(GPU memory report\) is not implemented" "$p" -M 1
    refuse "-K must leave iterations" "-K 5 skips every one of the 5 iterations" "$p" -I 1 -K 5 -n 5
    # -I (per-iteration columns), -K, -S (timestamp column) and -C (cputime label), across 2 processes: nccl-tests'
    # wider table, ordered statistics, and the per-iteration times in the JSON.
    timeout "$timeout_s" "${L2[@]}" "$p" "${args[@]}" -n 6 -I 1 -K 2 -S 1 -C 1 -J "$tmp/i.json" >"$out" 2>"$err"
    rc=$?
    problems=$(awk -v expected="$rows" '
      /^#       size +count +type +redop +root +cputime +algbw +busbw +#wrong +i_min +i_max +i_p99 +i_cv% +cputime .* timestamp$/ { header = 1 }
      /^# Per-Iteration Report: host timing; .*first 2 skipped$/ { report = 1 }
      /^ +[0-9]+ / {
        rows++
        if (NF != 23) { printf "row with %d fields (want 23); ", NF; next }
        if ($9 != "0" || $17 != "0") printf "#wrong not 0 in a row; "
        if (!($10 <= $12 && $12 <= $11 && $18 <= $20 && $20 <= $19)) printf "i_min <= i_p99 <= i_max fails: %s; ", $0
        if ($22 !~ /^20[0-9][0-9]-[01][0-9]-[0-3][0-9]$/ || $23 !~ /^[0-2][0-9]:[0-5][0-9]:[0-6][0-9]$/) printf "bad timestamp; "
      }
      END {
        if (!header) printf "no -I/-S/-C header line; "
        if (!report) printf "no Per-Iteration Report line; "
        if (rows != expected) printf "%d rows, want %d; ", rows, expected
      }' "$out")
    [ "$rc" -eq 0 ] || problems="exit status $rc; $problems"
    python3 - "$tmp/i.json" <<'PY' || problems="${problems}per-iteration JSON wrong; "
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    for k in ("out_of_place", "in_place"):
        it = r[k]["per_iter"]
        assert len(it["times_us"]) == 6, it
        kept = it["times_us"][2:]
        assert abs(it["min_us"] - min(kept)) < 1e-9 and abs(it["max_us"] - max(kept)) < 1e-9, it
        assert it["min_us"] <= it["p50_us"] <= it["p95_us"] <= it["p99_us"] <= it["max_us"], it
    assert len(r["timestamp"]) == 19, r
PY
    report "-I 1 -K 2 -S 1 -C 1 columns and JSON" "$problems" "$rc"
    check "-z 2 header line" all_reduce_perf "$rows" 0 "$p" "${args[@]}" -t 2 -z 2
    grep -q "^# Blocking Enabled: wait for completion after each collective (no barrier) $" "$out" ||
      report "-z 2 says so in the header" "no Blocking Enabled line" 1
    timeout "$timeout_s" "$p" -h >"$out" 2>"$err"
    rc=$?
    grep -q -- "--baseline" "$out" && [ "$rc" -eq 0 ] || report "-h" "usage text missing --baseline or status $rc" "$rc"
    ;;
  braidrun)
    # Environment: each rank sees torchrun's variables.
    timeout "$timeout_s" "$braidrun" -np 3 -- sh -c 'echo "env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT"' >"$out" 2>"$err"
    rc=$?
    problems=""
    [ "$rc" -eq 0 ] || problems="exit status $rc; "
    for r in 0 1 2; do
      grep -Eq "^env $r 3 $r 3 127\.0\.0\.1 [0-9]+$" "$out" || problems="${problems}no env line for rank $r; "
    done
    [ "$(awk '{print $7}' "$out" | sort -u | wc -l)" -eq 1 ] || problems="${problems}ranks disagree on MASTER_PORT; "
    report "braidrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT" "$problems" "$rc"
    # A failing rank: the others (sleeping) are stopped at once and its status is braidrun's.
    start=$(date +%s)
    timeout "$timeout_s" "$braidrun" -np 3 -- sh -c 'if [ "$RANK" = 1 ]; then exit 7; fi; exec sleep 60' >"$out" 2>"$err"
    rc=$?
    took=$(($(date +%s) - start))
    problems=""
    [ "$rc" -eq 7 ] || problems="exit status $rc, want 7; "
    [ "$took" -lt 30 ] || problems="${problems}took ${took}s, the others were not stopped; "
    grep -Eq "rank 1 \(pid [0-9]+\) exited with status 7" "$err" || problems="${problems}failed rank not named; "
    report "braidrun names a failed rank and stops the others" "$problems" "$rc"
    # A rank killed by a signal: 128 + signal number, and the signal named.
    timeout "$timeout_s" "$braidrun" -np 2 -- sh -c 'if [ "$RANK" = 0 ]; then kill -9 $$; fi; exec sleep 60' >"$out" 2>"$err"
    rc=$?
    problems=""
    [ "$rc" -eq 137 ] || problems="exit status $rc, want 137; "
    grep -Eq "rank 0 \(pid [0-9]+\) killed by signal" "$err" || problems="${problems}signal not named; "
    report "braidrun reports a rank killed by SIGKILL" "$problems" "$rc"
    # The rank that failed first is named, not the first one to exit: a killed rank's sockets close before its exit
    # completes (the kernel tears its memory down first), so a peer can see the death, fail and exit before the
    # killed rank is reaped. Here rank 1 signals rank 0 (a flag file, standing in for the closed socket), rank 0
    # exits with an error at once, and rank 1 dies from SIGKILL 20 ms later.
    flag=$(mktemp -u /tmp/braidrun-blame.XXXXXX)
    timeout "$timeout_s" "$braidrun" -np 2 -- sh -c "if [ \"\$RANK\" = 1 ]; then touch $flag; sleep 0.02; kill -9 \$\$; fi
      while [ ! -e $flag ]; do sleep 0.01; done; exit 1" >"$out" 2>"$err"
    rc=$?
    rm -f "$flag"
    problems=""
    [ "$rc" -eq 137 ] || problems="exit status $rc, want 137 (rank 1's SIGKILL); "
    grep -Eq "rank 1 \(pid [0-9]+\) killed by signal SIGKILL" "$err" || problems="${problems}$(cat "$err"); "
    report "braidrun names the rank that failed first (a killed rank over the one that exited because of it)" \
      "$problems" "$rc"
    # SIGTERM to braidrun reaches every rank.
    "$braidrun" -np 2 -- sh -c 'trap "echo term $RANK; exit 0" TERM; sleep 60 & wait' >"$out" 2>"$err" &
    pid=$!
    sleep 1
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    problems=""
    for r in 0 1; do grep -q "^term $r$" "$out" || problems="${problems}rank $r did not get SIGTERM; "; done
    report "braidrun forwards SIGTERM" "$problems" "$rc"
    # SIGHUP (a closed terminal) and SIGUSR1 reach the ranks too; braidrun itself stays to report them.
    "$braidrun" -np 2 -- sh -c 'trap "echo usr1 $RANK" USR1; trap "echo hup $RANK; exit 0" HUP
      while :; do sleep 0.2; done' >"$out" 2>"$err" &
    pid=$!
    sleep 1
    kill -USR1 "$pid"
    sleep 0.5
    kill -HUP "$pid"
    wait "$pid"
    rc=$?
    problems=""
    [ "$rc" -eq 0 ] || problems="exit status $rc, want 0 (the ranks' own); "
    for r in 0 1; do
      grep -q "^usr1 $r$" "$out" || problems="${problems}rank $r did not get SIGUSR1; "
      grep -q "^hup $r$" "$out" || problems="${problems}rank $r did not get SIGHUP; "
    done
    report "braidrun forwards SIGUSR1 and SIGHUP" "$problems" "$rc"
    # Launchers other than braidrun, by their variables: srun's tasks (no MASTER_ADDR: Slurm's first host),
    # torchrun's workers (its agent's store already holds MASTER_PORT), and an sbatch script calling the tool
    # directly (SLURM_NTASKS alone: one process, not a wait for absent ranks).
    port=$((20000 + RANDOM % 20000))
    run_pair() {  # run_pair NAME ENV...: the tool as ranks 0 and 1 of 2 processes with ENV plus RANK-specific vars
      local name=$1
      shift
      local pids=() r rc=0
      for r in 0 1; do
        timeout "$timeout_s" env "$@" "${rankvars[@]/@R@/$r}" "$perfdir/all_reduce_perf" "${args[@]}" \
          >"$tmp/pair$r" 2>&1 &
        pids+=($!)
      done
      for r in 0 1; do wait "${pids[$r]}" || rc=$?; done
      cp "$tmp/pair0" "$out"
      : >"$err"
      problems=""
      [ "$rc" -eq 0 ] || problems="exit status $rc: $(tail -2 "$tmp/pair1" | tr '\n' ' '); "
      grep -q "^# Out of bounds values : 0 OK$" "$out" || problems="${problems}no OK footer; "
      [ "$(grep -c '^#  Rank' "$out")" -eq 2 ] || problems="${problems}want 2 ranks; "
      report "$name" "$problems" "$rc"
    }
    rankvars=(SLURM_PROCID=@R@ SLURM_LOCALID=@R@)
    run_pair "srun's variables (SLURM_STEP_NUM_TASKS, first host of the nodelist)" SLURM_STEP_NUM_TASKS=2 \
      SLURM_NTASKS=2 SLURM_STEP_NODELIST="127.0.0.[3-4]" MASTER_PORT=$port NCCL_DEBUG=INFO
    grep -q "bootstrap root listening on 127.0.0.3:$port" "$out" ||
      report "srun: rank 0 listens on the nodelist's first host" "no root on 127.0.0.3:$port" 1
    python3 -c 'import socket,sys,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(120)' $((port + 7)) &
    store=$!
    sleep 0.5
    rankvars=(RANK=@R@ LOCAL_RANK=@R@)
    run_pair "torchrun's variables (its store on MASTER_PORT; braid takes MASTER_PORT + 1)" WORLD_SIZE=2 \
      LOCAL_WORLD_SIZE=2 GROUP_RANK=0 TORCHELASTIC_RUN_ID=none MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 7))
    kill "$store" 2>/dev/null
    # --bind cores: each rank thread gets a CPU of its own when the host's rank threads fit its CPUs.
    if [ "$(nproc)" -ge 2 ]; then
      check "--bind cores" all_reduce_perf "$rows" 0 "${L2[@]}" "$perfdir/all_reduce_perf" "${args[@]}" --bind cores
      [ "$(grep -cE '^#  Rank  [01] .*\[host\] CPU [0-9]+$' "$out")" -eq 2 ] &&
        [ "$(grep -oE 'CPU [0-9]+$' "$out" | sort -u | wc -l)" -eq 2 ] ||
        report "device lines name two different CPUs" "$(grep '^#  Rank' "$out" | tr '\n' ' ')" 1
      check "unbound by default" all_reduce_perf "$rows" 0 "${L2[@]}" "$perfdir/all_reduce_perf" "${args[@]}"
      [ "$(grep -cE '\[host\] CPU$' "$out")" -eq 2 ] || report "default names no CPU" "$(grep '^#  Rank' "$out")" 1
    fi
    # braidrun --bind-to core, as mpirun's: each local rank on a CPU of its own, when there are enough.
    if [ "$(nproc)" -ge 2 ]; then
      timeout "$timeout_s" "$braidrun" -np 2 --bind-to core -- sh -c 'echo "cpus $RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' >"$out" 2>"$err"
      rc=$?
      problems=""
      [ "$rc" -eq 0 ] || problems="exit status $rc; "
      [ "$(awk '/^cpus/ {print $3}' "$out" | sort -u | wc -l)" -eq 2 ] && ! grep -q -- "[-,]" <(awk '/^cpus/ {print $3}' "$out") ||
        problems="${problems}ranks not on one CPU each: $(tr '\n' ' ' <"$out"); "
      report "braidrun --bind-to core" "$problems" "$rc"
    fi
    timeout "$timeout_s" "$braidrun" -np $(($(nproc) + 1)) --bind-to core -- true >"$out" 2>"$err"
    rc=$?
    problems=""
    [ "$rc" -eq 0 ] || problems="exit status $rc; "
    grep -q "ranks but $(nproc) CPUs; leaving the ranks unbound" "$err" || problems="${problems}no warning; "
    report "braidrun --bind-to core with more ranks than CPUs warns and runs" "$problems" "$rc"
    check "more rank threads than CPUs stay unbound" all_reduce_perf "$rows" 0 "${L2[@]}" "$perfdir/all_reduce_perf" \
      "${args[@]}" -t "$(nproc)" --bind cores
    [ "$(grep -cE '\[host\] CPU$' "$out")" -eq $((2 * $(nproc))) ] ||
      report "oversubscribed ranks name no CPU" "$(grep '^#  Rank' "$out" | tr '\n' ' ')" 1
    check "sbatch script step (SLURM_NTASKS=2, no srun): one process" all_reduce_perf "$rows" 0 env SLURM_NTASKS=2 \
      SLURM_PROCID=0 "$perfdir/all_reduce_perf" "${args[@]}"
    ;;
  gloo)
    if ! "$perfdir/all_reduce_perf" --baseline gloo -b 8 -e 8 -n 1 >"$out" 2>"$err"; then
      if grep -q "no Gloo" "$err"; then echo "SKIP: this build has no Gloo"; exit 77; fi
    fi
    for t in $tools; do
      for np in 1 2 4; do
        launcher "$np"
        check "${t}_perf --baseline gloo, $np ranks" "${t}_perf" "$rows" 0 \
          "${L[@]}" "$perfdir/${t}_perf" --baseline gloo "${args[@]}" -r $((np - 1))
      done
    done
    refuse "gloo refuses bfloat16" "Gloo has no datatype for bfloat16" \
      "${L2[@]}" "$perfdir/all_reduce_perf" --baseline gloo -d bfloat16 -b 8 -e 8
    ;;
  mpi)
    if ! command -v mpirun >/dev/null; then echo "SKIP: no mpirun"; exit 77; fi
    if ! "$perfdir/all_reduce_perf" --baseline mpi -b 8 -e 8 -n 1 >"$out" 2>"$err"; then
      if grep -q "no MPI" "$err"; then echo "SKIP: this build has no MPI"; exit 77; fi
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Containers often forbid the cross-memory-attach single copy; shared memory still works without it.
    export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
    mpi=(mpirun --bind-to none)
    for t in $tools; do
      for np in 1 2 4; do
        check "${t}_perf --baseline mpi, $np ranks" "${t}_perf" "$rows" 0 \
          "${mpi[@]}" -np "$np" "$perfdir/${t}_perf" --baseline mpi "${args[@]}" -r $((np - 1))
      done
    done
    # braid itself under mpirun: the unique id travels by MPI_Bcast, no MASTER_ADDR needed.
    check "braid under mpirun, 3 ranks" all_reduce_perf "$rows" 0 "${mpi[@]}" -np 3 "$perfdir/all_reduce_perf" "${args[@]}"
    refuse "mpi refuses avg" "MPI has no reduction op avg" "${mpi[@]}" -np 2 "$perfdir/all_reduce_perf" --baseline mpi -o avg
    ;;
  fakedriver)
    # braid's CUDA communicators under the unmodified perf tools: the fake CUDA runtime over the strict fake driver
    # (build/fake_cuda), so cudaSetDevice makes a fake device's context current and braid's kernels run on the CTA
    # emulator; ranks as threads (-g 2) and as processes (braidrun -np 2), one fake device each.
    rt=$build/fake_cuda/libcudart.so.13
    [ -f "$rt" ] || { echo "FAIL: $rt not built" >&2; exit 1; }
    fd=(env BRAID_PERF_CUDART="$rt" BRAID_CUDA_DRIVER="$build/fake_cuda/libcuda.so.1" BRAID_FAKE_CUDA_DEVICES=4)
    for t in $tools; do
      check "${t}_perf on CUDA communicators, -g 2" "${t}_perf" "$rows" 0 \
        "${fd[@]}" "$perfdir/${t}_perf" --buffers device "${args[@]}" -g 2
    done
    check "all_reduce_perf on CUDA communicators, 2 processes" all_reduce_perf "$rows" 0 \
      "${fd[@]}" "${L2[@]}" "$perfdir/all_reduce_perf" --buffers device "${args[@]}"
    # LL128 (forced: the model never picks it before it has run on a GPU), registered device buffers (-R 1), and the
    # NVLS-style kernel over peer pointers (NCCL_ALGO=NVLS).
    check "all_reduce_perf with LL128 on CUDA communicators" all_reduce_perf "$rows" 0 \
      "${fd[@]}" NCCL_PROTO=LL128 "$perfdir/all_reduce_perf" --buffers device "${args[@]}" -g 2
    check "all_reduce_perf -R 1 on CUDA communicators" all_reduce_perf "$rows" 0 \
      "${fd[@]}" "$perfdir/all_reduce_perf" --buffers device "${args[@]}" -g 2 -R 1
    check "all_reduce_perf -R 2 (windows) on CUDA communicators" all_reduce_perf "$rows" 0 \
      "${fd[@]}" "$perfdir/all_reduce_perf" --buffers device "${args[@]}" -g 2 -R 2
    for t in all_reduce reduce_scatter all_gather; do
      check "${t}_perf NVLS-style on CUDA communicators" "${t}_perf" "$rows" 0 \
        "${fd[@]}" NCCL_ALGO=NVLS "$perfdir/${t}_perf" --buffers device "${args[@]}" -g 2
    done
    # The communicators really were CUDA ones, on the devices the tool chose.
    timeout "$timeout_s" "${fd[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$perfdir/all_reduce_perf" --buffers device \
      -g 2 -b 8 -e 8 >"$out" 2>"$err"
    problems=""
    for r in 0 1; do
      grep -q "rank $r: CUDA communicator on device $r, kernels from the CTA emulator's host image" "$out" ||
        problems="${problems}no CUDA communicator line for rank $r; "
    done
    report "the perf tools' communicators are CUDA communicators" "$problems" 0
    ;;
  devicebufs)
    # The device-buffer path of the perf tools: the fake CUDA runtime over the strict fake driver (build/fake_cuda),
    # so the buffers are fake device memory, braid's communicators are CUDA ones, and exact results prove the
    # images were copied in and the results copied back (either copy missing leaves poison or zeros).
    rt=$build/fake_cuda/libcudart.so.13
    [ -f "$rt" ] || { echo "FAIL: $rt not built" >&2; exit 1; }
    log=$tmp/cudart.log
    dev=(env BRAID_PERF_CUDART="$rt" BRAID_CUDA_DRIVER="$build/fake_cuda/libcuda.so.1" BRAID_FAKE_CUDART_LOG="$log")
    for t in $tools; do
      check "${t}_perf --buffers device, 2 ranks" "${t}_perf" "$rows" 0 \
        "${dev[@]}" "${L2[@]}" "$perfdir/${t}_perf" --buffers device "${args[@]}" -r 1
    done
    # Each process holds device (LOCAL_RANK x ranks per process + index) mod count, named as nccl-tests does; the
    # fake's device d is at PCI bus 0x18 + d.
    check "-t 2 -g 2 x 2 processes on 8 devices" all_reduce_perf "$rows" 0 env BRAID_FAKE_CUDA_DEVICES=8 \
      "${dev[@]}" "${L2[@]}" "$perfdir/all_reduce_perf" --buffers device "${args[@]}" -t 2 -g 2
    problems=""
    for r in 0 1 2 3 4 5 6 7; do
      grep -Eq "^#  Rank  $r Group  0 Pid +[0-9]+ on +[^ ]+ device  $r \[0000:$(printf %02x $((0x18 + r))):00\] braid fake GPU $r$" \
        "$out" || problems="${problems}no device line for rank $r on device $r; "
    done
    report "device lines name each rank's device" "$problems" 0
    refuse "--buffers device with too few devices" "4 devices requested but only 2 found" env \
      BRAID_FAKE_CUDA_DEVICES=2 "${dev[@]}" "${L2[@]}" "$perfdir/all_reduce_perf" --buffers device "${args[@]}" -t 2
    check "NCCL_TESTS_DEVICE picks the first device" all_reduce_perf "$rows" 0 env BRAID_FAKE_CUDA_DEVICES=4 \
      NCCL_TESTS_DEVICE=2 "${dev[@]}" "$perfdir/all_reduce_perf" --buffers device "${args[@]}" -t 2
    grep -Eq "^#  Rank  1 Group  0 Pid +[0-9]+ on +[^ ]+ device  3 \[0000:1b:00\] braid fake GPU 3$" "$out" ||
      report "NCCL_TESTS_DEVICE=2: rank 1 on device 3" "no such device line" 1
    : >"$log"
    check "-z 2 -C 1 -y 1 -u 1 -m 2 on device buffers" reduce_scatter_perf "$rows" 0 "${dev[@]}" "${L2[@]}" \
      "$perfdir/reduce_scatter_perf" --buffers device "${args[@]}" -z 2 -C 1 -y 1 -u 1 -m 2
    problems=""
    [ "$(wc -l <"$log")" -eq 2 ] || problems="want a fake-cudart log line from each of 2 processes; "
    awk '{split($2,c,"="); split($3,y,"="); if (c[2] < 10 || y[2] < 10) bad = 1} END {exit bad}' "$log" ||
      problems="${problems}too few copies or synchronizations: $(tr '\n' ' ' <"$log"); "
    report "device buffers are copied and streams synchronized" "$problems" 0
    check "a wrong value on device buffers is counted" all_reduce_perf "$rows" 1 env BRAID_PERF_INJECT_WRONG=1 \
      "${dev[@]}" "${L2[@]}" "$perfdir/all_reduce_perf" --buffers device "${args[@]}"
    # Regression: rank 1 (wrong values, exit status 1) must not leave before the reporter has written its last rows
    # and footer; braidrun stops the others once one rank fails, which used to cut them (1 run in 30).
    check "the report is whole when another rank exits with wrong values" all_reduce_perf "$rows" 1 env \
      BRAID_PERF_INJECT_WRONG=1 BRAID_PERF_REPORT_DELAY_MS=500 "${dev[@]}" "${L2[@]}" "$perfdir/all_reduce_perf" \
      --buffers device "${args[@]}"
    # auto: braid sees no CUDA driver (BRAID_CUDA_DRIVER names none here), so it runs on host memory, the buffers
    # stay there, no CUDA context is made, and the header says why.
    check "auto keeps host buffers for host communicators" all_reduce_perf "$rows" 0 env BRAID_PERF_CUDART="$rt" \
      BRAID_CUDA_DRIVER=/nonexistent/libcuda.so.1 "${L2[@]}" "$perfdir/all_reduce_perf" "${args[@]}"
    problems=""
    grep -q "^# Buffers in host memory: braid's communicators run on host memory" "$out" || problems="no note; "
    grep -q "device -1 \[host\] CPU" "$out" || problems="${problems}no host device line; "
    report "auto names why it chose host memory" "$problems" 0
    refuse "--buffers device without libcudart" "--buffers device: no CUDA device \(/nonexistent/libcudart.so.*cannot open" \
      env BRAID_PERF_CUDART=/nonexistent/libcudart.so "$perfdir/all_reduce_perf" --buffers device -b 8 -e 8
    refuse "--buffers device with a baseline" "--buffers device: --baseline gloo measures host memory only" \
      "${dev[@]}" "$perfdir/all_reduce_perf" --baseline gloo --buffers device -b 8 -e 8
    # The same binaries against NVIDIA's NCCL (where the CUDA toolkit has it): every symbol resolves at load
    # (LD_BIND_NOW) and, without a GPU, init fails with NCCL's own error instead of a crash.
    nvlib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')
    if [ -n "$nvlib" ] && [ "$(readlink -f "$nvlib")" != "$(readlink -f "$build/libnccl.so.2")" ]; then
      for t in $tools; do
        timeout "$timeout_s" env LD_LIBRARY_PATH="$(dirname "$nvlib")" LD_BIND_NOW=1 \
          "$perfdir/${t}_perf" -b 8 -e 8 -n 1 -w 0 >"$out" 2>"$err"
        rc=$?
        problems=""
        grep -q "symbol lookup error\|undefined symbol" "$err" && problems="unresolved symbol; "
        if [ "$rc" -ne 0 ]; then
          [ "$rc" -eq 2 ] || problems="${problems}exit status $rc; "
          grep -q "rank 0: ncclCommInitRank failed" "$err" || problems="${problems}no named init error; "
        fi
        report "${t}_perf loads NVIDIA's $(basename "$nvlib") ($(dirname "$nvlib"))" "$problems" "$rc"
      done
    else
      echo "SKIP: no NVIDIA libnccl.so.2 on this machine"
    fi
    refuse "--buffers elsewhere" "invalid buffer place \(--buffers auto\|host\|device\) 'elsewhere'" \
      "$perfdir/all_reduce_perf" --buffers elsewhere
    ;;
  *)
    echo "unknown mode '$mode' (braid, flags, braidrun, gloo, mpi, devicebufs, fakedriver)" >&2
    exit 2
    ;;
esac

if [ "$failures" -ne 0 ]; then
  echo "perf_tools_test $mode: $failures failure(s)"
  exit 1
fi
echo "perf_tools_test $mode: all passed"
