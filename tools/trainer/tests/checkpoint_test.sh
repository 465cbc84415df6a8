#!/bin/bash
# Sharded checkpoints: a run resumed from its own checkpoint gives bitwise the losses of the uninterrupted run, and
# a checkpoint written by N ranks loads into M ranks at any stage (resharding), continuing within fp32 tolerance
# of the uninterrupted run (the gradient sums change order with the rank count).
source "$(dirname "$0")/lib.sh" "$1" "$2"
cfg() {
  config "$WORK/s$1.json" "{\"train_batch_size\": 12, \"bf16\": {\"enabled\": $2}, \"zero_optimization\": {\"stage\": $1,
    \"stage3_param_persistence_threshold\": 0}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}}}"
}
for s in 0 1 2 3; do cfg $s false; done
train 2 "$WORK/s3.json" "$WORK/full.csv" --steps 6
train 2 "$WORK/s3.json" "$WORK/first.csv" --steps 3 --save "$WORK/ck2"
[ -f "$WORK/ck2/rank1-of-2.ckpt" ] || fail "no shard rank1-of-2.ckpt written"
train 2 "$WORK/s3.json" "$WORK/resumed.csv" --steps 3 --load "$WORK/ck2"
same_hex "$WORK/full.csv" "$WORK/first.csv" "first half"
same_hex "$WORK/full.csv" "$WORK/resumed.csv" "resume on 2 ranks, stage 3"
grep -q "^3," "$WORK/resumed.csv" || fail "the resumed run does not continue at step 3"
# Resharding: 2 -> 1, 3, 4 ranks, other stages.
train 1 "$WORK/s0.json" "$WORK/r1.csv" --steps 3 --load "$WORK/ck2"
train 3 "$WORK/s1.json" "$WORK/r3.csv" --steps 3 --load "$WORK/ck2"
train 4 "$WORK/s2.json" "$WORK/r4.csv" --steps 3 --load "$WORK/ck2"
for m in 1 3 4; do close "$WORK/full.csv" "$WORK/r$m.csv" 2e-6 "reshard 2 -> $m ranks"; done
# 4 -> 3 ranks with periodic saves, mixed precision.
for s in 1 3; do cfg $s true; done
train 4 "$WORK/s3.json" "$WORK/bf.csv" --steps 4 --save "$WORK/ck4" --save-every 2
train 3 "$WORK/s1.json" "$WORK/bf3.csv" --steps 2 --load "$WORK/ck4"
grep -q "^4," "$WORK/bf3.csv" || fail "bf16 4 -> 3 ranks: does not continue at step 4"
train 4 "$WORK/s3.json" "$WORK/bf4.csv" --steps 2 --load "$WORK/ck4"
train 4 "$WORK/s3.json" "$WORK/bffull.csv" --steps 6
same_hex "$WORK/bffull.csv" "$WORK/bf4.csv" "bf16 resume on 4 ranks"
close "$WORK/bffull.csv" "$WORK/bf3.csv" 1e-4 "bf16 reshard 4 -> 3 ranks"
finish
