#!/bin/bash
# The bytes each rank reports holding (counted by the engine's allocator ledger) match the ZeRO formulas for Psi
# parameters on N ranks, mixed precision (2 + 2 + 12 bytes per parameter):
#   stage 0: 2Psi + 2Psi + 12Psi; 1: 2Psi + 2Psi + 12Psi/N; 2: 2Psi + (2 + 12)Psi/N; 3: 16Psi/N,
# within the padding of each unit to a multiple of N, and stage 3 holds at most the largest unit gathered (two with
# a prefetch of one block: stage3_prefetch_bucket_size 13000 elements). fp32 (no master copy: 4 + 4 + 8 bytes) is checked at stage 3 too.
source "$(dirname "$0")/lib.sh" "$1" "$2"

# check N STAGE PRECISION OVERLAP
check() {
  local n=$1 s=$2 prec=$3 overlap=$4
  local extra=""
  [ "$prec" = bf16 ] && extra="\"bf16\": {\"enabled\": true},"
  config "$WORK/m.json" "{\"train_batch_size\": 12, $extra \"zero_optimization\": {\"stage\": $s,
    \"overlap_comm\": $overlap, \"stage3_prefetch_bucket_size\": 13000, \"stage3_param_persistence_threshold\": 0}}"
  train "$n" "$WORK/m.json" "$WORK/m.csv" --steps 1 --channels 32 --heads 4 || return
  if ! awk -v n="$n" -v s="$s" -v prec="$prec" -v overlap="$overlap" '
      /^braid-train: / { for (i = 1; i <= NF; ++i) if ($i == "params") psi = $(i - 1) }
      /^memory formula/ { for (i = 1; i <= NF; ++i) if ($i == "unit") largest = $(i + 1) }
      /^memory rank/ {
        rank = $3; p = $5; g = $7; o = $9; gp = $13
        w = prec == "bf16" ? 2 : 4; k = prec == "bf16" ? 12 : 8
        fp = s >= 3 ? w * psi / n : w * psi
        fg = s >= 2 ? w * psi / n : w * psi
        fo = s >= 1 ? k * psi / n : k * psi
        tol = 16 * 4 * n   # 4 units, each padded by fewer than n elements
        if (abs(p - fp) > tol || abs(g - fg) > tol || abs(o - fo) > tol) {
          printf "rank %s: params %d grads %d optimizer %d, formula %d %d %d\n", rank, p, g, o, fp, fg, fo; bad = 1
        }
        if (s == 3 && n > 1 && (overlap == "false" ? (gp < largest || gp > largest + 4 * n) : (gp < largest || gp > 2 * (largest + 4 * n)))) {
          printf "rank %s: gathered peak %d, largest unit %d bytes\n", rank, gp, largest; bad = 1
        }
        if (s < 3 && gp != 0) { printf "rank %s: gathered %d at stage %d\n", rank, gp, s; bad = 1 }
        ++ranks
      }
      function abs(x) { return x < 0 ? -x : x }
      END { if (ranks != n || psi == 0) { print "missing memory lines"; bad = 1 } exit bad }' "$WORK/m.csv.out"; then
    fail "memory: $n ranks, stage $s, $prec, overlap $overlap"
    cat "$WORK/m.csv.out"
  fi
}
for n in 1 2 4; do
  for s in 0 1 2 3; do check $n $s bf16 false; done
done
check 4 3 bf16 true
check 3 3 fp32 false
check 2 1 fp32 true
finish
