#!/usr/bin/env bash
# Include layering (docs/architecture.md): a file may include headers of its own layer and of the layers it
# depends on, nothing else. The layers, lowest first:
#   common      src/common                  Status, logging, params, OS helpers (+ include/nccl_env.h, the env
#                                           plugin's C ABI, which src/common/env_plugin.cc speaks)
#   devcommon   src/backends/common         host+device headers (FIFO view, memory orders, step engine)
#   bootstrap   src/bootstrap               unique id, rendezvous, out-of-band collectives
#   topology    topology                    discovery, graph, XML, search
#   algorithms  algorithms                  schedules as data, checkers, selector, cost model
#   transports  transports                  the Transport interface and registry, shm, net (+ include/nccl_net.h)
#   backend     src/backends/backend.h,     the Backend interface (what core may see of a backend), and the queue
#               src/backends/rma_posts.h    by which streams hand one-sided messages to the core's messenger
#   backends    src/backends/*.cc, cpu/     backend implementations
#   core        src/core                    communicators, groups, selection, planning, links (+ include/nccl_tuner.h
#                                           and include/nccl_profiler.h, the tuner and profiler plugins' C ABIs,
#                                           which src/core/tuner_plugin.cc and profiler_plugin.cc speak)
#   api         src/api                     the C entry points (+ include/nccl.h)
# Usage: tests/build/layering_test.sh SOURCE_DIR. Prints every violation; exits 1 if there is one.
set -euo pipefail
if [ "${1:-}" = --selftest ]; then
  # The check must be able to fail: a tree whose lowest layer includes the core is refused, naming the file.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/common" "$tmp/src/core" "$tmp/topology" "$tmp/algorithms" "$tmp/transports"
  printf '#include "src/core/comm.h"\n' >"$tmp/src/common/bad.h"
  printf '#include "src/common/bad.h"\n' >"$tmp/src/core/comm.h"
  if out=$(bash "$0" "$tmp"); then
    echo "FAIL: a common header including src/core passed the layering check"
    exit 1
  fi
  grep -q 'src/common/bad.h (common) includes "src/core/comm.h" (core)' <<<"$out" || {
    echo "FAIL: the violation was not named: $out"
    exit 1
  }
  echo "layering selftest: a violation is caught and named"
  exit 0
fi
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src"

layer_of() {
  case "$1" in
    src/common/*) echo common ;;
    src/backends/common/*) echo devcommon ;;
    src/backends/backend.h | src/backends/rma_posts.h) echo backend ;;
    src/backends/*) echo backends ;;
    src/bootstrap/*) echo bootstrap ;;
    src/core/*) echo core ;;
    src/api/*) echo api ;;
    topology/*) echo topology ;;
    algorithms/*) echo algorithms ;;
    transports/*) echo transports ;;
    include/nccl_tuner.h | include/nccl_profiler.h) echo tunerabi ;;
    include/nccl_env.h) echo envabi ;;
    include/* | nccl.h | nccl_net.h) echo public ;;
    braid_build_config.h) echo generated ;;
    *) echo unknown ;;
  esac
}

allowed() {  # layer -> the layers it may include
  case "$1" in
    common) echo "common envabi" ;;
    devcommon) echo "common devcommon" ;;
    bootstrap) echo "common bootstrap" ;;
    topology) echo "common topology" ;;
    algorithms) echo "common devcommon topology algorithms" ;;
    transports) echo "common devcommon transports public" ;;
    backend) echo "common devcommon algorithms transports backend" ;;
    backends) echo "common devcommon algorithms transports backend backends" ;;
    core) echo "common devcommon bootstrap topology algorithms transports backend core tunerabi" ;;
    api) echo "common core api public generated" ;;
  esac
}

violations=0
checked=0
while IFS= read -r f; do
  from=$(layer_of "$f")
  ok=" $(allowed "$from") "
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    to=$(layer_of "$inc")
    checked=$((checked + 1))
    if [[ "$ok" != *" $to "* ]]; then
      echo "LAYERING: $f ($from) includes \"$inc\" ($to); $from may include: $(allowed "$from")"
      violations=$((violations + 1))
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find src topology algorithms transports -name '*.h' -o -name '*.cc' | sort)

# The communicator stays narrow (NCCL's 185-field ncclComm is the cautionary tale): at most 22 data members, each a
# layer's object rather than its fields. Data members are the declarations of the class body ending in ';' that
# are not functions (no '(' before any initializer) - a heuristic, written for this code's style.
comm=src/core/comm.h
if [ -f "$comm" ]; then
  members=$(awk '/^class Communicator \{/,/^\};/' "$comm" | sed -e 's://.*$::' |
    grep -E '^  [A-Za-z].*;[[:space:]]*$' | grep -vE '^  (using|friend|static|struct|class|enum) ' |
    sed -e 's/[{=].*$//' | grep -v '(' | wc -l)
  if [ "$members" -gt 22 ]; then
    echo "LAYERING: Communicator has $members data members (at most 22): move state into a layer's object"
    violations=$((violations + 1))
  else
    echo "layering: Communicator has $members data members (at most 22)"
  fi
fi

if [ "$violations" -ne 0 ]; then
  echo "layering: $violations violation(s) in $checked project includes"
  exit 1
fi
echo "layering: $checked project includes follow the layers"
