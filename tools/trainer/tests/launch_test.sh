#!/bin/bash
# Launch paths give the same run: braidrun, torchrun-style variables set by hand (RANK, WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT), torchrun itself (its store holding MASTER_PORT), Open MPI's mpirun when installed, and a plain
# process for one rank. Losses are compared bitwise.
# Ranks started with different configs refuse to train.
source "$(dirname "$0")/lib.sh" "$1" "$2"
config "$WORK/c.json" '{"train_batch_size": 12, "zero_optimization": {"stage": 2}}'
ARGS=(--config "$WORK/c.json" --layers 2 --channels 16 --heads 2 --ctx 16 --corpus-bytes 20000 --steps 3)
train 2 "$WORK/c.json" "$WORK/braidrun.csv" --steps 3

# By hand, torchrun style, on a free port from below the ephemeral range (see free_port.py for why).
FREE_PORT=$(dirname "$0")/../../../tests/common/free_port.py
PORT=$(python3 "$FREE_PORT")
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    timeout 60 "$TRAIN" "${ARGS[@]}" --log "$WORK/env$r.csv" > "$WORK/env$r.out" 2>&1 &
done
wait %1 || fail "torchrun-style rank 0 failed: $(cat "$WORK/env0.out")"
wait %2 || fail "torchrun-style rank 1 failed: $(cat "$WORK/env1.out")"
same_hex "$WORK/braidrun.csv" "$WORK/env0.csv" "torchrun-style variables vs braidrun"

# Under torchrun (TORCHELASTIC_RUN_ID set), torchrun's own store already listens on MASTER_PORT: braid's bootstrap
# must take the next port. A listener that accepts and never answers stands in for the store; a rank that used
# MASTER_PORT itself would fail to bind it (rank 0) or talk to the stand-in and time out (rank 1).
python3 "$FREE_PORT" --pair --hold > "$WORK/store.port" &
STORE_PID=$!
for _ in $(seq 50); do [ -s "$WORK/store.port" ] && break; sleep 0.1; done
SPORT=$(cat "$WORK/store.port")
[ -n "$SPORT" ] || fail "the stand-in store did not start"
for r in 0 1; do
  TORCHELASTIC_RUN_ID=braid-test RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$SPORT BRAID_TIMEOUT=10 timeout 60 "$TRAIN" "${ARGS[@]}" --log "$WORK/torch$r.csv" \
    > "$WORK/torch$r.out" 2>&1 &
done
wait %2 || fail "under torchrun with its store on MASTER_PORT=$SPORT, rank 0 failed: $(cat "$WORK/torch0.out")"
wait %3 || fail "under torchrun with its store on MASTER_PORT=$SPORT, rank 1 failed: $(cat "$WORK/torch1.out")"
kill "$STORE_PID" 2> /dev/null
wait "$STORE_PID" 2> /dev/null
same_hex "$WORK/braidrun.csv" "$WORK/torch0.csv" "under torchrun (store on MASTER_PORT) vs braidrun"

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
PORT2=$(python3 "$FREE_PORT")
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
