#!/usr/bin/env bash
# braid-topo end to end: discovery here, fixtures, NCCL_TOPO_FILE / NCCL_TOPO_DUMP round trip, graph dump and
# reload (NCCL_GRAPH_DUMP_FILE / NCCL_GRAPH_FILE), BRAID_HWLOC_XML, malformed files, and (mode dot) Graphviz.
# usage: braid_topo_test.sh BUILD_DIR SOURCE_DIR [basic|dot]
set -euo pipefail
build=$1
src=$2
mode=${3:-basic}
topo=$build/tools/topo/braid-topo
fx=$src/tests/fixtures/topo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "$mode" = dot ]; then
  command -v dot >/dev/null || { echo "graphviz (dot) not installed: skipped"; exit 77; }
  for f in "$fx"/*.xml; do
    case $f in *hwloc*) continue ;; esac
    for n in 1 2; do
      "$topo" --topo "$f" --nodes $n --quiet --dot "$tmp/t.dot"
      dot -Tsvg "$tmp/t.dot" -o "$tmp/t.svg" || fail "dot could not render $f (nodes $n)"
      grep -q "<svg" "$tmp/t.svg" || fail "no svg for $f"
    done
  done
  echo "dot renders every fixture"
  exit 0
fi

# Discovery on whatever machine this is must work.
"$topo" > "$tmp/here.txt" || fail "discovery failed"
grep -q "^Channel 00/" "$tmp/here.txt" || fail "no channels on this machine"

# DGX-H100: the 24 channels NCCL reports on one node; 16 over two nodes.
"$topo" --topo "$fx/dgx_h100.xml" > "$tmp/h100.txt"
grep -q "^Channel 00/24 : 0 1 2 3 4 5 6 7$" "$tmp/h100.txt" || fail "DGX-H100 channels"
grep -q "Pattern 4, crossNic 0, nChannels 12, bw 30.0/30.0, type NVL/LOC" "$tmp/h100.txt" || fail "DGX-H100 ring graph"
"$topo" --topo "$fx/dgx_h100.xml" --nodes 2 | grep "^Channel 15/16 : " > /dev/null || fail "two DGX-H100 nodes"

# Dump and reload (through the tool and through NCCL_TOPO_FILE): the same system, paths and channels.
"$topo" --topo "$fx/p5_48xlarge.xml" --dump "$tmp/dump.xml" | tail -n +2 > "$tmp/a.txt"
NCCL_TOPO_FILE="$tmp/dump.xml" "$topo" | tail -n +2 > "$tmp/b.txt"
diff "$tmp/a.txt" "$tmp/b.txt" > /dev/null || fail "NCCL_TOPO_FILE of a dump differs"

# Graph dump, then the dump as NCCL_GRAPH_FILE: same graphs.
NCCL_GRAPH_DUMP_FILE="$tmp/graph.xml" "$topo" --topo "$fx/dgx_a100.xml" --nodes 2 > "$tmp/c.txt"
grep -q '<graphs version="1">' "$tmp/graph.xml" || fail "no graph dump"
NCCL_GRAPH_FILE="$tmp/graph.xml" "$topo" --topo "$fx/dgx_a100.xml" --nodes 2 > "$tmp/d.txt"
diff <(sed -n '/## Ring graph/,$p' "$tmp/c.txt") <(sed -n '/## Ring graph/,$p' "$tmp/d.txt") > /dev/null ||
  fail "NCCL_GRAPH_FILE did not reproduce the dumped graphs"

# NCCL_CROSS_NIC and NCCL_P2P_DISABLE take effect.
NCCL_P2P_DISABLE=1 "$topo" --topo "$fx/pcie_4gpu.xml" | grep "^GPU/0 *LOC *PHB/24.0" > /dev/null || fail "NCCL_P2P_DISABLE"
"$topo" --topo "$fx/pcie_4gpu.xml" | grep "^GPU/0 *LOC *PIX/24.0" > /dev/null || fail "PIX without NCCL_P2P_DISABLE"
NCCL_CROSS_NIC=1 "$topo" --topo "$fx/dgx_h100.xml" --nodes 2 | grep "^Pattern 4, crossNic 1, nChannels 8" > /dev/null || fail "NCCL_CROSS_NIC=1"

# --tune: NCCL's model over the searched graphs (reference 6.7 on one DGX-H100), a sweep 8 B .. 8 GB by x4
# (16 sizes) whose choice moves from Ring/LL to NVLS; NCCL_ALGO removes columns; LL128 off on the PCIe box.
"$topo" --topo "$fx/dgx_h100.xml" --tune > "$tmp/tune.txt"
grep -Eq "^Ring +LL +141\.0 +80\.6 +15\.0$" "$tmp/tune.txt" || fail "--tune Ring LL row: $(grep '^Ring' "$tmp/tune.txt")"
grep -Eq "^NVLS +Simple +476\.0 +272\.0 +25\.0$" "$tmp/tune.txt" || fail "--tune NVLS row"
# Each sweep twice: NCCL's (every pair's time) and what braid runs (FIFO, NVLS-style, choice: the rows matched by
# $braid_row below, which NCCL's rows of 8 columns never match).
braid_row='^ +[0-9]+ +[0-9.]+ +-?[0-9.]+  (Ring|Tree|NVLS)/(LL|Simple)$'
[ "$(grep -cE '^ +[0-9]+ .* (Ring|Tree|NVLS)/(LL|LL128|Simple)$' "$tmp/tune.txt")" -eq 32 ] || fail "--tune sweep rows"
[ "$(grep -cE "$braid_row" "$tmp/tune.txt")" -eq 16 ] || fail "--tune: braid's sweep rows"
# By default the NVLS-style path is not priced on GPUs (it has not run on one): -1, the FIFO path at every size.
grep -q "^# what braid runs on these GPUs (8 ranks, 2 channels): .*(BRAID_GPU_DIRECT_AUTO is not 1 on every rank" \
  "$tmp/tune.txt" || fail "--tune braid header"
grep -Eq "^ +8 +15\.0 +-1\.0  Ring/LL$" "$tmp/tune.txt" || fail "--tune: braid's 8 B row"
grep -E "$braid_row" "$tmp/tune.txt" | grep -q "NVLS/Simple$" && fail "--tune: NVLS-style chosen without the opt-in"
# Opted in, on NVSwitch: priced by NCCL's symmetric-kernel model with the communicator's 2 channels as lanes,
# 7.8 us + softplus(-1) at 8 B against the ring's 15 us; the ring wins from 8 MB (staging and 2 lanes).
BRAID_GPU_DIRECT_AUTO=1 "$topo" --topo "$fx/dgx_h100.xml" --tune > "$tmp/tune_auto.txt"
grep -q "^# what braid runs on these GPUs (8 ranks, 2 channels): .*(2 lanes, peer pointers)$" "$tmp/tune_auto.txt" ||
  fail "--tune opted in: braid header"
grep -Eq "^ +8 +15\.0 +8\.1  NVLS/Simple$" "$tmp/tune_auto.txt" || fail "--tune opted in: braid's 8 B row"
grep -Eq "^ +8388608 +[0-9.]+ +[0-9.]+  Ring/Simple$" "$tmp/tune_auto.txt" || fail "--tune opted in: braid's 8 MB row"
# On PCIe the path has no price even opted in (NCCL runs no symmetric kernel there).
BRAID_GPU_DIRECT_AUTO=1 "$topo" --topo "$fx/pcie_4gpu.xml" --tune > "$tmp/tune_pcie.txt"
grep -q "NVLS-style path (not every pair of GPUs is joined by NVLink" "$tmp/tune_pcie.txt" || fail "--tune PCIe: why"
grep -Eq "^ +8 +[0-9.]+ +-1\.0  Ring/LL$" "$tmp/tune_pcie.txt" || fail "--tune PCIe: braid's 8 B row"
grep -Eq "^ +[0-9]+ +[0-9.]+ +[0-9.]+  NVLS/Simple$" "$tmp/tune_pcie.txt" && fail "--tune PCIe: NVLS-style chosen"
grep -Eq "^ +8 .* Ring/LL$" "$tmp/tune.txt" || fail "--tune: 8 B is not Ring/LL"
grep -Eq "^ +8589934592 .* NVLS/Simple$" "$tmp/tune.txt" || fail "--tune: 8 GB is not NVLS"
NCCL_ALGO=ring "$topo" --topo "$fx/dgx_h100.xml" --tune --coll allgather > "$tmp/tune_ring.txt"
grep -q "NVLS/Simple" "$tmp/tune_ring.txt" && fail "NCCL_ALGO=ring still has NVLS in the sweep"
grep -Eq "^NVLS +Simple .*off: NCCL_ALGO$" "$tmp/tune_ring.txt" || fail "NCCL_ALGO=ring: NVLS row"
# (Into files, not piped into grep -q: under pipefail grep's early exit can fail the writer with SIGPIPE.)
grep -Eq "^Ring +LL128 .*off: LL128 path rule" "$tmp/tune_pcie.txt" || fail "--tune LL128 on PCIe"
"$topo" --topo "$fx/dgx_h100.xml" --tune --nodes 2 > "$tmp/tune_2n.txt"
grep -Eq "^NVLSTree +Simple +[0-9]" "$tmp/tune_2n.txt" || fail "--tune NVLSTree, 2 nodes"
grep -q "NVLS-style path (the NVLS-style path runs on one host)" "$tmp/tune_2n.txt" || fail "--tune 2 nodes: why"
"$topo" --topo "$fx/dgx_h100.xml" --tune --coll bogus 2> /dev/null && fail "--tune --coll bogus accepted"

# hwloc XML replay (when built with hwloc).
if "$topo" --hwloc-xml "$fx/hwloc_2socket.xml" > "$tmp/hw.txt" 2> "$tmp/hw.err"; then
  grep -q "name=mlx5_0" "$tmp/hw.txt" || fail "hwloc replay lost mlx5_0"
else
  grep -q "needs braid built with hwloc" "$tmp/hw.err" || fail "hwloc replay: $(cat "$tmp/hw.err")"
fi

# Malformed input: an error naming the file, line and element, exit status 1, no crash.
printf '<system version="1">\n  <cpu numaid="0">\n    <pci busid="0000:01:00.0" link_width="x"/>\n  </cpu>\n</system>\n' \
  > "$tmp/bad.xml"
set +e
"$topo" --topo "$tmp/bad.xml" > /dev/null 2> "$tmp/err.txt"
rc=$?
set -e
[ $rc -eq 1 ] || fail "malformed file: exit status $rc"
grep -q "bad.xml:3: <pci>: attribute link_width=\"x\" is not an integer" "$tmp/err.txt" || fail "error text: $(cat "$tmp/err.txt")"
echo "braid-topo: all checks passed"
