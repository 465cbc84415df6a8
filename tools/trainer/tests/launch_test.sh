#!/bin/bash
# Launch paths give the same run: braidrun, torchrun-style variables set by hand (RANK, WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT), Open MPI's mpirun when installed, and a plain process for one rank. Losses are compared bitwise.
# Ranks started with different configs refuse to train.
source "$(dirname "$0")/lib.sh" "$1" "$2"
config "$WORK/c.json" '{"train_batch_size": 12, "zero_optimization": {"stage": 2}}'
ARGS=(--config "$WORK/c.json" --layers 2 --channels 16 --heads 2 --ctx 16 --corpus-bytes 20000 --steps 3)
train 2 "$WORK/c.json" "$WORK/braidrun.csv" --steps 3

# By hand, torchrun style. A free port: bind to 0 and read it back.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    timeout 60 "$TRAIN" "${ARGS[@]}" --log "$WORK/env$r.csv" > "$WORK/env$r.out" 2>&1 &
done
wait %1 || fail "torchrun-style rank 0 failed: $(cat "$WORK/env0.out")"
wait %2 || fail "torchrun-style rank 1 failed: $(cat "$WORK/env1.out")"
same_hex "$WORK/braidrun.csv" "$WORK/env0.csv" "torchrun-style variables vs braidrun"

if command -v mpirun > /dev/null; then
  # Open MPI refuses root unless told; --oversubscribe allows 2 ranks on a 1-core runner.
  if timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 -x MASTER_PORT="$PORT" "$TRAIN" "${ARGS[@]}" \
      --log "$WORK/mpi.csv" > "$WORK/mpi.out" 2>&1; then
    same_hex "$WORK/braidrun.csv" "$WORK/mpi.csv" "mpirun vs braidrun"
  else
    fail "mpirun -np 2: $(cat "$WORK/mpi.out")"
  fi
else
  echo "mpirun not installed: skipping the mpirun launch"
fi

# Ranks given different configs stop at once with a message instead of issuing mismatched collectives.
config "$WORK/other.json" '{"train_batch_size": 12, "zero_optimization": {"stage": 3}}'
PORT2=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  cfg=$WORK/c.json
  [ $r -eq 1 ] && cfg=$WORK/other.json
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT2 timeout 30 "$TRAIN" "${ARGS[@]}" --config "$cfg" \
    > "$WORK/mismatch$r.out" 2>&1 &
done
wait %1 && fail "mismatched configs: rank 0 succeeded"
wait %2 && fail "mismatched configs: rank 1 succeeded"
for r in 0 1; do
  grep -q "the ranks were given different configs or arguments" "$WORK/mismatch$r.out" ||
    fail "mismatched configs, rank $r: $(cat "$WORK/mismatch$r.out")"
done

# One rank without a launcher equals braidrun -np 1.
train 1 "$WORK/c.json" "$WORK/one.csv" --steps 3
timeout 60 "$TRAIN" "${ARGS[@]}" --log "$WORK/plain.csv" > "$WORK/plain.out" 2>&1 || fail "plain run: $(cat "$WORK/plain.out")"
same_hex "$WORK/one.csv" "$WORK/plain.csv" "no launcher vs braidrun -np 1"
grep -q "via no launcher" "$WORK/plain.out" || fail "plain run does not say it had no launcher"
finish
