#!/bin/bash
# The trainer's benchmark: loss curves of stage 0 and stage 3 on 4 ranks against 1 rank (same seed, same global
# batch of 16 sequences of 32 characters), tokens/s, and the per-rank memory table for 1, 2 and 4 ranks.
#   tools/trainer/bench/loss_curve.sh [BUILD_DIR [OUT_DIR [STEPS]]]
# Writes OUT_DIR/{r1s0,r4s0,r4s3}.csv, OUT_DIR/memory.md and OUT_DIR/trainer-loss.png (docs/img/trainer-loss.png is
# this plot). Needs gnuplot for the plot.
set -eu
BUILD=${1:-build}
OUT=${2:-/tmp/braid-train-bench}
STEPS=${3:-300}
TRAIN=$BUILD/tools/trainer/braid-train
RUN=$BUILD/tools/braidrun/braidrun
MODEL=(--layers 2 --channels 64 --heads 4 --ctx 32 --seed 1)
mkdir -p "$OUT"
export BRAID_DETERMINISTIC=1

config() {  # config FILE STAGE OVERLAP [PRECISION-KEYS] (default: bf16 with fp32 reductions)
  local precision=${4-'"bf16": {"enabled": true}, "communication_data_type": "fp32",'}
  cat > "$1" <<JSON
{"train_batch_size": 16, $precision
 "zero_optimization": {"stage": $2, "overlap_comm": $3, "reduce_bucket_size": 50000, "allgather_bucket_size": 50000,
                       "stage3_prefetch_bucket_size": 50000, "stage3_param_persistence_threshold": 0},
 "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 0.002, "betas": [0.9, 0.95], "weight_decay": 0.1}}}
JSON
}

run() {  # run NAME NRANKS STAGE OVERLAP [PRECISION-KEYS]
  config "$OUT/$1.json" "$3" "$4" ${5+"$5"}
  "$RUN" -np "$2" "$TRAIN" --config "$OUT/$1.json" "${MODEL[@]}" --steps "$STEPS" --log "$OUT/$1.csv" \
    --log-every 50 > "$OUT/$1.out"
  echo "$1: $(grep '^timing' "$OUT/$1.out")"
}

run r1s0 1 0 false
run r4s0 4 0 true
run r4s3 4 3 true
# The same in fp32, to show how much of the drift between rank counts bf16 adds.
run r1f32 1 0 false ""
run r4f32 4 3 true ""

# Largest loss difference against one rank, over all steps.
for f in r4s0 r4s3 r4f32; do
  ref=r1s0
  [ "$f" = r4f32 ] && ref=r1f32
  paste -d, "$OUT/$ref.csv" "$OUT/$f.csv" |
    awk -F, -v f="$f" 'NR > 1 { d = $2 - $9; if (d < 0) d = -d; if (d / $2 > m) { m = d / $2; s = $1 } }
                       END { printf "%s vs 1 rank: max relative loss difference %.3g (step %d)\n", f, m, s }'
done
paste -d, "$OUT/r4s0.csv" "$OUT/r4s3.csv" |
  awk -F, 'NR > 1 && $3 != $10 { n++ } END { printf "4 ranks stage 0 vs stage 3: %d of %d steps differ bitwise\n", n, NR - 1 }'

# Memory table: rank 0's bytes after one step, every stage, 1/2/4 ranks.
{
  echo "| ranks | stage | params | grads | optimizer | total | bytes/param | gathered peak | formula total |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for n in 1 2 4; do
    for s in 0 1 2 3; do
      config "$OUT/mem.json" "$s" false
      "$RUN" -np "$n" "$TRAIN" --config "$OUT/mem.json" "${MODEL[@]}" --steps 1 > "$OUT/mem.out"
      awk -v n="$n" -v s="$s" '
        /^memory formula/ { for (i = 1; i <= NF; ++i) { if ($i == "total") ft = $(i + 1); if ($i ~ /^psi=/) { sub(/psi=/, "", $i); sub(/\)/, "", $i); psi = $i } } }
        /^memory rank 0:/ { p = $5; g = $7; o = $9; t = $11; gp = $13 }
        END { printf "| %d | %d | %d | %d | %d | %d | %.2f | %d | %d |\n", n, s, p, g, o, t, t / psi, gp, ft }' "$OUT/mem.out"
    done
  done
} > "$OUT/memory.md"
cat "$OUT/memory.md"

if command -v gnuplot > /dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,540 font "sans,10"
set output "$OUT/trainer-loss.png"
set datafile separator ","
set title "braid-train: char-level transformer (106k params, bf16), global batch 16x32 tokens, AdamW"
set xlabel "step"
set ylabel "training loss (nats/char)"
set key top right
set grid
plot "$OUT/r1s0.csv" using 1:2 every ::1 with lines lw 3 lc rgb "#999999" title "1 rank", \
     "$OUT/r4s0.csv" using 1:2 every ::1 with lines lw 1.5 lc rgb "#1f77b4" title "4 ranks, ZeRO stage 0 (DDP)", \
     "$OUT/r4s3.csv" using 1:2 every ::1 with lines lw 1 dt 2 lc rgb "#d62728" title "4 ranks, ZeRO stage 3 (FSDP)"
GP
  echo "plot: $OUT/trainer-loss.png"
fi
