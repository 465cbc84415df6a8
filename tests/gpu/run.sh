#!/usr/bin/env bash
# The GPU checks, as one script for a machine with an NVIDIA GPU and driver (the device tool's machine):
#   bash tests/gpu/run.sh [BUILD_DIR]        (default build/; built here when missing)
# What a GPU checks today:
#  1. every <coll>_perf on device buffers with NVIDIA's NCCL from the CUDA toolkit (LD_LIBRARY_PATH), one rank per
#     GPU (-g), every value checked;
#  2. braid itself on that machine: --buffers auto keeps host buffers for braid (the perf tools' policy, and says
#     why); --buffers device runs braid's CUDA communicators (ranks as threads, one GPU each, kernels from the
#     embedded fatbin) with the default protocol, LL and Simple, every value checked;
#  3. the differential probe (tests/gpu/cuda_api_probe.cc): the driver calls braid makes, against the real driver,
#     diffed with what the fake answers (tests/fixtures/cuda_probe/expected.txt, "~" lines left out). A difference
#     means the fake, or braid's belief about the driver, is wrong: the diff goes into the log.
# Writes its log to $OUT/gpu-perf.log and a JSON summary (every check with ok/failed and its line, the GPUs, the
# failure count) to $OUT/gpu-summary.json, OUT defaulting to /tmp; exits non-zero when a check fails.
set -u
build=${1:-build}
log=${OUT:-/tmp}/gpu-perf.log
summary=${OUT:-/tmp}/gpu-summary.json
: >"$log"
checks=()
json_text() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | tr -d '\n\r\t'; }
record() { checks+=("{\"check\": \"$(json_text "$1")\", \"ok\": $2}"); }
say() { echo "$*" | tee -a "$log"; }
failures=0
fail() { say "FAIL: $*"; record "$*" false; failures=$((failures + 1)); }
pass() { say "ok: $*"; record "$*" true; }
write_summary() {
  local gpus=$1 skipped=${2:-}
  {
    printf '{"gpus": %s, "failures": %d' "$gpus" "$failures"
    [ -n "$skipped" ] && printf ', "skipped": "%s"' "$(json_text "$skipped")"
    printf ', "checks": ['
    local first=1
    for c in "${checks[@]+"${checks[@]}"}"; do
      [ $first -eq 1 ] || printf ', '
      printf '%s' "$c"
      first=0
    done
    printf ']}\n'
  } >"$summary"
}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >>"$log" 2>&1; then
  say "SKIP: no NVIDIA GPU or driver here (nvidia-smi -L failed)"
  write_summary 0 "no NVIDIA GPU or driver here (nvidia-smi -L failed)"
  exit 0
fi
ngpus=$(nvidia-smi -L | wc -l)
if [ ! -x "$build/perf/all_reduce_perf" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" >>"$log" 2>&1 || { fail "build"; exit 1; }
fi
nvlib=$(ldconfig -p | awk '/libnccl\.so\.2 / {print $NF; exit}')
[ -n "$nvlib" ] || { fail "no NVIDIA libnccl.so.2 (CUDA toolkit) found"; exit 1; }
nvdir=$(dirname "$nvlib")
say "GPUs: $ngpus; NVIDIA NCCL: $nvlib"

tools="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv gather scatter"
for t in $tools; do
  out=$(env LD_LIBRARY_PATH="$nvdir" timeout 300 "$build/perf/${t}_perf" -g "$ngpus" -b 8 -e 128M -f 4 -c 1 2>&1)
  rc=$?
  echo "$out" >>"$log"
  [ "$rc" -eq 0 ] || fail "${t}_perf with NVIDIA NCCL: exit status $rc"
  echo "$out" | grep -Eq '^#  Rank  0 .* device  0 \[[0-9a-fA-F:.]+\] ' || fail "${t}_perf: no GPU device line"
  echo "$out" | grep -q '^# Out of bounds values : 0 OK$' || fail "${t}_perf: wrong values"
  echo "$out" | grep -q 'Avg bus bandwidth' && pass "${t}_perf on device buffers, NVIDIA NCCL: $(echo "$out" | grep 'Avg bus')"
done

out=$("$build/perf/all_reduce_perf" -b 8 -e 1M -f 8 -c 1 2>&1)
rc=$?
echo "$out" >>"$log"
[ "$rc" -eq 0 ] && echo "$out" | grep -q '^# Buffers in host memory: the communicators report no CUDA device' ||
  fail "braid --buffers auto on a GPU machine: exit $rc or no host-buffer note"
# braid's CUDA communicators: one rank per GPU as threads of this process (two ranks sharing the GPU when there is
# one), device buffers and streams, kernels from the embedded fatbin; every value checked (#wrong 0). Then each
# protocol forced (LL128 has not run on a GPU before), NVLS-style over peer pointers, and the kernels' bandwidth
# beside NVIDIA's (above).
ranks=(-g "$ngpus")
[ "$ngpus" -eq 1 ] && ranks=(-t 2 -g 1)
# "NCCL_ALGO=NVLS -R 1": the buffers registered, so the peers read each rank's input in place (zero-copy).
for setting in "" NCCL_PROTO=LL NCCL_PROTO=LL128 NCCL_PROTO=Simple NCCL_ALGO=NVLS "NCCL_ALGO=NVLS -R 1"; do
  envs=()
  args=()
  for w in $setting; do
    case $w in
      *=*) envs+=("$w") ;;
      *) args+=("$w") ;;
    esac
  done
  out=$(env "${envs[@]}" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_DEBUG=WARN timeout 300 "$build/perf/all_reduce_perf" \
    --buffers device "${ranks[@]}" -b 8 -e 128M -f 4 -c 1 "${args[@]}" 2>&1)
  rc=$?
  echo "$out" >>"$log"
  label="braid all_reduce_perf on device buffers (CUDA communicators, ${ranks[*]}${setting:+, $setting})"
  if [ "$rc" -eq 0 ] && echo "$out" | grep -q '^# Out of bounds values : 0 OK$'; then
    pass "$label: $(echo "$out" | grep 'Avg bus')"
  else
    fail "$label: exit $rc: $(echo "$out" | tail -3 | tr '\n' ' ')"
  fi
done
if [ -x "$build/tests/cuda_api_probe" ]; then
  probe=$(env -u BRAID_CUDA_DRIVER "$build/tests/cuda_api_probe" 2>&1)
  rc=$?
  echo "$probe" >>"$log"
  if [ "$rc" -ne 0 ]; then
    fail "cuda_api_probe on the real driver: exit status $rc"
  elif ! diff <(grep -v '^~' tests/fixtures/cuda_probe/expected.txt) <(echo "$probe" | grep -v '^~') >>"$log"; then
    fail "cuda_api_probe: the real driver answers differently from the fake (diff in $log)"
  else
    pass "cuda_api_probe: the real driver answers as the fake does ($(echo "$probe" | grep -vc '^~') calls)"
  fi
  echo "$probe" | grep '^~' | sed 's/^/driver choice: /' | tee -a "$log"
else
  fail "no $build/tests/cuda_api_probe (build the tests)"
fi

write_summary "$ngpus"
if [ "$failures" -ne 0 ]; then
  say "gpu checks: $failures failure(s) (summary: $summary)"
  exit 1
fi
say "gpu checks: all passed (summary: $summary)"
