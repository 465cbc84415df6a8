/* include/nccl_net.h compiles as strict C99 (-pedantic -Werror), and its layouts are the ones NCCL's ext-net
 * headers give on LP64 (checked member by member below), so a plugin built against NVIDIA's headers loads into
 * braid. Offsets are those of NCCL's net_v8.h / net_v9.h / net_v10.h (2.19-2.26), net_v11.h (2.28-2.29) and
 * net_v12.h (2.30-2.32). */
#include <stddef.h>
#include <stdio.h>

#include "nccl_net.h"

#define CHECK_AT(line, cond) typedef char braid_check_##line[(cond) ? 1 : -1]
#define ASSERT_LAYOUT(line, cond) CHECK_AT(line, cond)

/* Function tables: the name pointer plus 18 (v8) or 19 (v9, v10: makeVDevice) function pointers, in order. */
ASSERT_LAYOUT(1, sizeof(ncclNet_v8_t) == 19 * sizeof(void*));
ASSERT_LAYOUT(2, sizeof(ncclNet_v9_t) == 20 * sizeof(void*));
ASSERT_LAYOUT(3, sizeof(ncclNet_v10_t) == 20 * sizeof(void*));
ASSERT_LAYOUT(4, offsetof(ncclNet_v8_t, isend) == 10 * sizeof(void*));
ASSERT_LAYOUT(5, offsetof(ncclNet_v8_t, test) == 13 * sizeof(void*));
ASSERT_LAYOUT(6, offsetof(ncclNet_v8_t, irecvConsumed) == 18 * sizeof(void*));
ASSERT_LAYOUT(7, offsetof(ncclNet_v9_t, makeVDevice) == 19 * sizeof(void*));
ASSERT_LAYOUT(8, offsetof(ncclNet_v10_t, makeVDevice) == 19 * sizeof(void*));

/* Properties. */
ASSERT_LAYOUT(10, offsetof(ncclNetProperties_v8_t, ptrSupport) == 24);
ASSERT_LAYOUT(11, offsetof(ncclNetProperties_v8_t, latency) == 40);
ASSERT_LAYOUT(12, offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56);
ASSERT_LAYOUT(13, sizeof(ncclNetProperties_v8_t) == 64);
ASSERT_LAYOUT(14, offsetof(ncclNetProperties_v9_t, forceFlush) == 32);
ASSERT_LAYOUT(15, offsetof(ncclNetProperties_v9_t, vProps) == 64);
ASSERT_LAYOUT(16, offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88);
ASSERT_LAYOUT(17, sizeof(ncclNetProperties_v9_t) == 104);
ASSERT_LAYOUT(18, sizeof(ncclNetProperties_v10_t) == sizeof(ncclNetProperties_v9_t));
ASSERT_LAYOUT(19, sizeof(ncclNetDeviceHandle_v8_t) == 32);
ASSERT_LAYOUT(20, NCCL_NET_HANDLE_MAXSIZE == 128 && NCCL_NET_MAX_REQUESTS == 32);
ASSERT_LAYOUT(21, NCCL_PTR_HOST == 1 && NCCL_PTR_CUDA == 2 && NCCL_PTR_DMABUF == 4);

/* v11 / v12: 21 function pointers (finalize and setNetAttr after makeVDevice); ctx-first listen and connect. */
ASSERT_LAYOUT(30, sizeof(ncclNet_v11_t) == 22 * sizeof(void*));
ASSERT_LAYOUT(31, sizeof(ncclNet_v12_t) == 22 * sizeof(void*));
ASSERT_LAYOUT(32, offsetof(ncclNet_v11_t, finalize) == 20 * sizeof(void*));
ASSERT_LAYOUT(33, offsetof(ncclNet_v12_t, setNetAttr) == 21 * sizeof(void*));
ASSERT_LAYOUT(34, offsetof(ncclNet_v12_t, isend) == 10 * sizeof(void*));
ASSERT_LAYOUT(35, offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88);
ASSERT_LAYOUT(36, offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
ASSERT_LAYOUT(37, sizeof(ncclNetProperties_v11_t) == 112);
ASSERT_LAYOUT(38, sizeof(ncclNetVDeviceProps_v12_t) == 36);
ASSERT_LAYOUT(39, offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104);
ASSERT_LAYOUT(40, offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120);
ASSERT_LAYOUT(41, offsetof(ncclNetProperties_v12_t, railId) == 124);
ASSERT_LAYOUT(42, offsetof(ncclNetProperties_v12_t, planeId) == 126);
ASSERT_LAYOUT(43, sizeof(ncclNetProperties_v12_t) == 128);
ASSERT_LAYOUT(44, sizeof(ncclNetCommAttr_v11_t) == 16 && sizeof(ncclNetAttr_v12_t) == 44);
ASSERT_LAYOUT(45, offsetof(ncclNetAttr_v11_t, op) == 32 && offsetof(ncclNetAttr_v11_t, proto) == 40);
ASSERT_LAYOUT(46, sizeof(ncclNetCommConfig_v12_t) == 4 && NCCL_NET_MAX_DEVS_PER_NIC == 8);

int main(void) {
  ncclNet_v8_t table = {0};
  ncclNetProperties_v8_t props = {0};
  ncclNetAttr_t attr = NCCL_NET_ATTR_INIT;
  if (attr.sendCommAttr.maxConcurrentPeers != NCCL_NET_ATTR_UNDEF || attr.proto != (uint32_t)NCCL_NET_ATTR_UNDEF) return 1;
  props.ptrSupport = NCCL_PTR_HOST;
  (void)table;
  printf("nccl_net.h: C99 ok, ncclNet_v8_t %u bytes, properties %u bytes\n", (unsigned)sizeof(table),
         (unsigned)sizeof(props));
  return props.ptrSupport == NCCL_PTR_HOST ? 0 : 1;
}
