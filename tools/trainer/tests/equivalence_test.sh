#!/bin/bash
# Stages 0-3 on 1, 2, 3 and 4 ranks against one rank, same seed and global batch (12 sequences):
#   - for each rank count, every stage gives bitwise the same losses (BRAID_DETERMINISTIC=1; braid's direct path
#     reduces all-reduce and reduce-scatter in rank order);
#   - against one rank, losses agree within 2e-6 relative (fp32; measured 3e-9): the batch's gradient is summed in another order
#     (per rank, then across ranks), which changes the last bits, and those differences grow a little per step;
#   - with overlap_comm and prefetch on, the losses are bitwise those without;
#   - with gradient accumulation and one collective per unit, within 2e-6 of one rank;
#   - bf16 with fp32 reductions, gradient clipping and accumulation: within 1e-4 of one rank (measured 6e-6).
source "$(dirname "$0")/lib.sh" "$1" "$2"
STEPS=4
for n in 1 2 3 4; do
  for s in 0 1 2 3; do
    config "$WORK/c$n$s.json" "{\"train_batch_size\": 12, \"zero_optimization\": {\"stage\": $s,
      \"reduce_bucket_size\": 3000, \"allgather_bucket_size\": 3000, \"stage3_param_persistence_threshold\": 0},
      \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}}}"
    train $n "$WORK/c$n$s.json" "$WORK/l$n$s.csv" --steps $STEPS
    [ "$s" -gt 0 ] && same_hex "$WORK/l${n}0.csv" "$WORK/l$n$s.csv" "$n ranks: stage 0 vs stage $s"
  done
  [ "$n" -gt 1 ] && close "$WORK/l10.csv" "$WORK/l${n}0.csv" 2e-6 "1 rank vs $n ranks (fp32)"
done
# Overlap and prefetch change when collectives run, never what they compute.
for s in 0 2 3; do
  config "$WORK/o$s.json" "{\"train_batch_size\": 12, \"zero_optimization\": {\"stage\": $s, \"overlap_comm\": true,
    \"reduce_bucket_size\": 3000, \"stage3_prefetch_bucket_size\": 8000, \"stage3_param_persistence_threshold\": 0},
    \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}}}"
  train 3 "$WORK/o$s.json" "$WORK/o$s.csv" --steps $STEPS
  same_hex "$WORK/l30.csv" "$WORK/o$s.csv" "3 ranks: overlap_comm stage $s vs stage 0"
done
# Gradient accumulation in fp32 (micro batch 2 on 2 ranks: 3 micro-steps), contiguous_gradients off (one
# collective per unit): the same global-batch gradient, summed in another order.
for s in 0 2 3; do
  config "$WORK/a$s.json" "{\"train_batch_size\": 12, \"train_micro_batch_size_per_gpu\": 2,
    \"zero_optimization\": {\"stage\": $s, \"contiguous_gradients\": false, \"stage3_param_persistence_threshold\": 0},
    \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}}}"
  train 2 "$WORK/a$s.json" "$WORK/a$s.csv" --steps $STEPS
  close "$WORK/l10.csv" "$WORK/a$s.csv" 2e-6 "accumulation, stage $s, 2 ranks vs 1 rank"
done
# Mixed precision with accumulation (micro batch 2: 6 micro-steps on 1 rank, 3 on 2, 1 on 4... per rank).
for n in 1 2 3; do
  config "$WORK/b$n.json" "{\"train_batch_size\": 12, \"train_micro_batch_size_per_gpu\": 2, \"bf16\": {\"enabled\": true},
    \"communication_data_type\": \"fp32\", \"gradient_clipping\": 0.5,
    \"zero_optimization\": {\"stage\": 3, \"overlap_comm\": true, \"stage3_param_persistence_threshold\": 600},
    \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"betas\": [0.9, 0.95], \"weight_decay\": 0.1}}}"
  train $n "$WORK/b$n.json" "$WORK/b$n.csv" --steps $STEPS
  [ "$n" -gt 1 ] && close "$WORK/b1.csv" "$WORK/b$n.csv" 1e-4 "bf16 stage 3: 1 rank vs $n ranks"
done
# fp16 with dynamic loss scaling: a scale that fits trains like one rank; 2^30 overflows, and the step is skipped.
for n in 1 2; do
  config "$WORK/f$n.json" "{\"train_batch_size\": 12, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 10},
    \"zero_optimization\": {\"stage\": 2}, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}}}"
  train $n "$WORK/f$n.json" "$WORK/f$n.csv" --steps $STEPS --log-every 1
  grep -q SKIPPED "$WORK/f$n.csv.out" && fail "fp16, $n ranks: a step was skipped at loss scale 2^10"
done
close "$WORK/f1.csv" "$WORK/f2.csv" 1e-3 "fp16 stage 2: 1 rank vs 2 ranks"
config "$WORK/fo.json" "{\"train_batch_size\": 12, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 30,
  \"hysteresis\": 1}, \"zero_optimization\": {\"stage\": 3}}"
train 2 "$WORK/fo.json" "$WORK/fo.csv" --steps 2 --log-every 1
grep -q "^step 0 .*loss_scale 1073741824.* SKIPPED (fp16 overflow)" "$WORK/fo.csv.out" || fail "fp16: no overflow skip at 2^30"
grep -q "^step 1 .*loss_scale 536870912" "$WORK/fo.csv.out" || fail "fp16: the loss scale did not halve after an overflow"
finish
