#!/bin/bash
# Bad configs and arguments are rejected before any training, with exit status 2 and a message naming the key (or
# argument) and the value; nothing is silently downgraded.
source "$(dirname "$0")/lib.sh" "$1" "$2"

# reject NAME JSON EXPECTED-SUBSTRING [NRANKS]
reject() {
  local name=$1 json=$2 want=$3 n=${4:-1}
  config "$WORK/$name.json" "$json"
  local out status
  out=$(timeout 30 "$BRAIDRUN" -np "$n" "$TRAIN" --config "$WORK/$name.json" --steps 1 2>&1)
  status=$?
  if [ "$status" -eq 0 ]; then
    fail "$name: accepted"
  elif ! grep -qF -- "$want" <<< "$out"; then
    fail "$name: message lacks '$want': $out"
  fi
}
OK='"train_batch_size": 4'
reject unknown_top "{$OK, \"zero_allow_untested_optimizer\": true}" "unsupported config key 'zero_allow_untested_optimizer' (value true)"
reject unknown_zero "{$OK, \"zero_optimization\": {\"stage\": 1, \"round_robin_gradients\": true}}" \
  "unsupported config key 'zero_optimization.round_robin_gradients'"
reject stage4 "{$OK, \"zero_optimization\": {\"stage\": 4}}" "'zero_optimization.stage' has value 4"
reject stage_frac "{$OK, \"zero_optimization\": {\"stage\": 1.5}}" "'zero_optimization.stage' has value 1.5"
reject stage_str "{$OK, \"zero_optimization\": {\"stage\": \"3\"}}" "'zero_optimization.stage' has value \"3\""
reject auto "{\"train_batch_size\": \"auto\"}" "'train_batch_size' is \"auto\""
reject nvme "{$OK, \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\"}}}" \
  "'zero_optimization.offload_optimizer.device' has value \"nvme\""
reject offload_key "{$OK, \"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}}}" \
  "unsupported config key 'zero_optimization.offload_optimizer.pin_memory'"
reject both_precisions "{$OK, \"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}}" "both 'bf16.enabled' and 'fp16.enabled'"
reject comm_type "{$OK, \"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp16\"}" \
  "'communication_data_type' has value \"fp16\" but the model runs in bf16"
reject optimizer "{$OK, \"optimizer\": {\"type\": \"SGD\"}}" "'optimizer.type' has value \"SGD\""
reject opt_param "{$OK, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9}}}" \
  "unsupported config key 'optimizer.params.momentum'"
reject betas "{$OK, \"optimizer\": {\"params\": {\"betas\": [0.9]}}}" "'optimizer.params.betas' has value [...]"
reject scheduler "{$OK, \"scheduler\": {\"type\": \"WarmupLR\"}}" "unsupported config key 'scheduler'"
reject batch_mismatch "{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3}" \
  "train_batch_size must equal micro batch x accumulation x world size"
reject batch_ranks "{\"train_batch_size\": 4}" "train_batch_size is not a multiple of accumulation x world size" 3
reject no_batch "{\"zero_optimization\": {\"stage\": 0}}" "set train_batch_size or train_micro_batch_size_per_gpu"
reject bad_json "{\"train_batch_size\": 4,}" "config is not valid JSON: line 1, column 24"
reject duplicate "{$OK, $OK}" "duplicate key \"train_batch_size\""
reject clipping "{$OK, \"gradient_clipping\": -1}" "'gradient_clipping' has value -1"
reject bucket "{$OK, \"zero_optimization\": {\"reduce_bucket_size\": 0}}" "'zero_optimization.reduce_bucket_size' has value 0"

# Arguments.
arg() {
  local want=$1
  shift
  local out
  if out=$(timeout 30 "$TRAIN" "$@" 2>&1); then
    fail "arguments $*: accepted"
  elif ! grep -qF -- "$want" <<< "$out"; then
    fail "arguments $*: message lacks '$want': $out"
  fi
}
config "$WORK/ok.json" "{$OK}"
arg "argument --config is required" --steps 1
arg "cannot read config file '$WORK/missing.json'" --config "$WORK/missing.json"
arg "argument --heads has value 3: it must divide --channels (32)" --config "$WORK/ok.json" --heads 3
arg "argument --steps has value 'ten'" --config "$WORK/ok.json" --steps ten
arg "unknown argument '--stage'" --config "$WORK/ok.json" --stage 3 --steps 1
arg "no checkpoint in '$WORK/none'" --config "$WORK/ok.json" --load "$WORK/none" --steps 1
arg "config file '$WORK' is not a regular file" --config "$WORK"
printf 'Hello\n' > "$WORK/upper.txt"
arg "character 'H' (byte 72) at offset 0 is outside the alphabet" --config "$WORK/ok.json" --corpus "$WORK/upper.txt"
arg "argument --save has value '/proc/braid-train-nope': cannot create it" --config "$WORK/ok.json" --save /proc/braid-train-nope
"$TRAIN" --config "$WORK/ok.json" --steps 1 --save "$WORK/ck" > /dev/null 2>&1 || fail "saving a checkpoint failed"
arg "this run has vocab 30, ctx 16, channels 16, layers 2, heads 2" --config "$WORK/ok.json" --load "$WORK/ck" \
  --channels 16 --heads 2
RANK=5 WORLD_SIZE=2 arg "RANK='5' is not a rank below WORLD_SIZE=2" --config "$WORK/ok.json"
finish
