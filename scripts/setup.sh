#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks, then configures and builds braid into ./build (or $BUILD_DIR).
# Safe to re-run: packages already present are skipped and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

# The perf tools' baselines (Open MPI, Gloo, iperf3) and plots (gnuplot) come from Debian too; BRAID_MINIMAL=1
# skips them.
packages=(build-essential cmake pkg-config python3 libgtest-dev libgmock-dev libbenchmark-dev libhwloc-dev
  libfabric-dev libibverbs-dev  # the OFI and IB networks (transports/net/, docs/networks.md)
  libssl-dev libssl3  # OpenSSL 3: headers to build the TLS layer, the library ncclSetEncryption loads (docs/multihost.md)
  graphviz   # graphviz: braid-topo --dot pictures (docs/topology.md) and the topo_tool_dot test
  iproute2  # iproute2: `ip netns`, veth and bridges for the multi-host tests (tests/multihost)
  clang libclang-rt-14-dev)  # clang: the clang_build test; libclang-rt: libFuzzer and ASan for fuzz_run
if [ "${BRAID_MINIMAL:-0}" != 1 ]; then
  packages+=(libopenmpi-dev openmpi-bin libgloo-dev gnuplot-nox iperf3)  # iperf3: perf/net_baseline.sh
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
