#!/usr/bin/env bash
# libnccl.so.2 does not need libibverbs or libfabric to load: the IB and OFI networks dlopen() them
# (src/common/dyn_lib.h). Checks:
#   1. no NEEDED entry for libibverbs / libfabric / librdmacm, and no undefined ibv_* / fi_* symbol;
#   2. when the networks are built in, the library names they dlopen are inside;
#   3. as root with unshare(1), in a private mount namespace where both libraries are /dev/null (a host without
#      them, as far as ld.so can tell): a program linking only libnccl.so.2 runs an all-reduce, and the IB and OFI
#      networks report zero devices naming the library, with NCCL_NET=IB / OFI refused (braid_net_tests'
#      NetLibMissing group with the default library names). Skipped, not failed, without root or unshare.
# Usage: no_rdma_needed.sh <libnccl.so.2> <compat_no_rdma_consumer> <braid_net_tests> <have_ibverbs> <have_libfabric>
set -euo pipefail
lib=$1
consumer=$2
net_tests=$3
have_ib=$4
have_ofi=$5
fail=0

needed=$(readelf -d "$lib" | awk '/\(NEEDED\)/ {print $NF}')
echo "NEEDED: $(echo $needed)"
if echo "$needed" | grep -E 'libibverbs|libfabric|librdmacm'; then
  echo "FAIL: $lib needs an RDMA library at load time"
  fail=1
fi
undef=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | grep -E '^(ibv_|fi_|__ibv_)' || true)
if [ -n "$undef" ]; then
  echo "FAIL: undefined RDMA symbols in $lib: $(echo $undef)"
  fail=1
fi

# Built in: the default library names are in the binary (BRAID_IBVERBS_LIB / BRAID_LIBFABRIC_LIB defaults).
if [ "$have_ib" = ON ] && ! grep -q 'libibverbs\.so\.1' "$lib"; then
  echo "FAIL: built with the IB network but $lib does not mention libibverbs.so.1"
  fail=1
fi
if [ "$have_ofi" = ON ] && ! grep -q 'libfabric\.so\.1' "$lib"; then
  echo "FAIL: built with the OFI network but $lib does not mention libfabric.so.1"
  fail=1
fi
[ "$fail" = 0 ] || exit 1
echo "ok: no load-time dependency on libibverbs / libfabric"

# A host without the libraries, simulated: bind /dev/null over the files ld.so would find.
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! unshare --mount true 2>/dev/null; then
  echo "skipped: the run without the libraries needs root and unshare --mount"
  exit 0
fi
targets=()
for soname in libibverbs.so.1 libfabric.so.1; do
  for f in $(ldconfig -p | awk -v s="$soname" '$1 == s {print $NF}'); do targets+=("$(readlink -f "$f")"); done
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "neither library is installed here: nothing to hide"
fi
unshare --mount bash -euo pipefail -c '
  consumer=$1
  net_tests=$2
  shift 2
  for t in "$@"; do mount --bind /dev/null "$t"; done
  for t in "$@"; do
    if head -c 4 "$t" | grep -q ELF; then echo "FAIL: could not hide $t"; exit 1; fi
  done
  echo "hidden: $*"
  "$consumer" || { echo "FAIL: the all-reduce did not run without the libraries"; exit 1; }
  BRAID_IBVERBS_LIB=libibverbs.so.1 BRAID_LIBFABRIC_LIB=libfabric.so.1 \
    "$net_tests" --gtest_filter=NetLibMissing.* ||
    { echo "FAIL: the IB / OFI networks misbehave without their libraries"; exit 1; }
' _ "$consumer" "$net_tests" "${targets[@]}"
echo "ok: libnccl.so.2 works with libibverbs and libfabric replaced by /dev/null"
