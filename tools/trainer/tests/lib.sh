# Shared helpers of the braid-train tests. Usage: source lib.sh <braid-train> <braidrun>.
set -u
TRAIN=$1
BRAIDRUN=$2
WORK=$(mktemp -d /tmp/braid-train-test.XXXXXX)
[ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
FAILURES=0
# Every rank count and stage below must agree bitwise: braid's deterministic reductions.
export BRAID_DETERMINISTIC=1
# A dead peer is reported within seconds instead of BRAID_TIMEOUT's default minute.
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-20}

fail() {
  echo "FAIL: $*"
  FAILURES=$((FAILURES + 1))
}

# train NRANKS CONFIG LOG [extra braid-train args...]: a tiny model, logs to LOG (csv).
train() {
  local n=$1 cfg=$2 log=$3
  shift 3
  timeout 60 "$BRAIDRUN" -np "$n" "$TRAIN" --config "$cfg" --layers 2 --channels 16 --heads 2 --ctx 16 \
    --corpus-bytes 20000 --log "$log" --log-every 1000 "$@" > "$log.out" 2>&1
  local status=$?
  if [ "$status" -ne 0 ]; then
    fail "braid-train -np $n --config $(basename "$cfg") $*: exit status $status"
    cat "$log.out"
    return 1
  fi
}

# same_hex A B: the loss columns (hex floats) of two logs are identical, for the steps both hold.
same_hex() {
  if ! awk -F, 'NR==FNR { if (FNR > 1) a[$1] = $3; next } FNR > 1 && ($1 in a) { n++; if (a[$1] != $3) { print "step " $1 ": " a[$1] " vs " $3; bad = 1 } }
               END { if (n == 0) { print "no common steps"; bad = 1 } exit bad }' "$1" "$2"; then
    fail "$3: losses differ bitwise ($1 vs $2)"
  fi
}

# close A B RTOL: the losses agree within a relative tolerance.
close() {
  if ! awk -F, -v tol="$3" 'NR==FNR { if (FNR > 1) a[$1] = $2; next } FNR > 1 && ($1 in a) { n++; d = a[$1] - $2; if (d < 0) d = -d;
               if (d > tol * a[$1]) { print "step " $1 ": " a[$1] " vs " $2; bad = 1 } }
               END { if (n == 0) { print "no common steps"; bad = 1 } exit bad }' "$1" "$2"; then
    fail "$4: losses differ by more than $3 relative ($1 vs $2)"
  fi
}

# config FILE JSON: writes a config file.
config() { printf '%s\n' "$2" > "$1"; }

finish() {
  if [ "$FAILURES" -ne 0 ]; then
    echo "$FAILURES check(s) failed"
    exit 1
  fi
  echo "all checks passed"
}
