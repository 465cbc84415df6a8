/* include/nccl_profiler.h compiles as strict C11 (-pedantic -Werror), and its layouts are NCCL's on LP64 (offsets of
 * profiler_v4.h .. profiler_v7.h), so a profiler built against NVIDIA's headers loads into braid. */
#include <stddef.h>
#include <stdio.h>

#include "nccl_profiler.h"

#define CHECK_AT(line, cond) typedef char braid_check_##line[(cond) ? 1 : -1]
#define ASSERT_LAYOUT(line, cond) CHECK_AT(line, cond)

/* v4: an 8-bit type, no API events. */
ASSERT_LAYOUT(1, sizeof(ncclProfilerEventDescr_v4_t) == 104);
ASSERT_LAYOUT(2, offsetof(ncclProfilerEventDescr_v4_t, parentObj) == 8);
ASSERT_LAYOUT(3, offsetof(ncclProfilerEventDescr_v4_t, coll.func) == 32);
ASSERT_LAYOUT(4, offsetof(ncclProfilerEventDescr_v4_t, coll.nChannels) == 80);
ASSERT_LAYOUT(5, offsetof(ncclProfilerEventDescr_v4_t, coll.proto) == 96);
ASSERT_LAYOUT(6, offsetof(ncclProfilerEventDescr_v4_t, p2p.nChannels) == 60);
ASSERT_LAYOUT(7, offsetof(ncclProfilerEventDescr_v4_t, proxyOp.isSend) == 44);
ASSERT_LAYOUT(8, sizeof(ncclProfilerEventStateArgs_v4_t) == 8);
/* v5 / v6: a 64-bit type, API events, parentGroup. */
ASSERT_LAYOUT(10, sizeof(ncclProfilerEventDescr_v5_t) == 112);
ASSERT_LAYOUT(11, sizeof(ncclProfilerEventDescr_v6_t) == 112);
ASSERT_LAYOUT(12, offsetof(ncclProfilerEventDescr_v5_t, groupApi.groupDepth) == 28);
ASSERT_LAYOUT(13, offsetof(ncclProfilerEventDescr_v5_t, collApi.graphCaptured) == 64);
ASSERT_LAYOUT(14, offsetof(ncclProfilerEventDescr_v5_t, p2pApi.graphCaptured) == 56);
ASSERT_LAYOUT(15, offsetof(ncclProfilerEventDescr_v5_t, coll.parentGroup) == 104);
ASSERT_LAYOUT(16, offsetof(ncclProfilerEventDescr_v5_t, p2p.parentGroup) == 64);
ASSERT_LAYOUT(17, offsetof(ncclProfilerEventDescr_v6_t, ceColl.syncStrategy) == 80);
ASSERT_LAYOUT(18, offsetof(ncclProfilerEventDescr_v6_t, ceColl.stream) == 104);
/* v7: user tags, kernel variants, kernel phases. */
ASSERT_LAYOUT(20, sizeof(ncclProfilerEventDescr_v7_t) == 136);
ASSERT_LAYOUT(21, offsetof(ncclProfilerEventDescr_v7_t, collApi.userTag) == 72);
ASSERT_LAYOUT(22, offsetof(ncclProfilerEventDescr_v7_t, p2pApi.userTag) == 64);
ASSERT_LAYOUT(23, offsetof(ncclProfilerEventDescr_v7_t, coll.kernelVariant) == 112);
ASSERT_LAYOUT(24, offsetof(ncclProfilerEventDescr_v7_t, coll.isSymColl) == 120);
ASSERT_LAYOUT(25, offsetof(ncclProfilerEventDescr_v7_t, coll.userTag) == 128);
ASSERT_LAYOUT(26, offsetof(ncclProfilerEventDescr_v7_t, p2p.userTag) == 72);
ASSERT_LAYOUT(27, offsetof(ncclProfilerEventDescr_v7_t, ceColl.userTag) == 112);
ASSERT_LAYOUT(28, offsetof(ncclProfilerEventDescr_v7_t, kernelPhase.pTimer) == 40);
/* Tables: name and five functions; event bits and states are NCCL's numbers. */
ASSERT_LAYOUT(30, sizeof(ncclProfiler_v4_t) == 6 * sizeof(void*) && sizeof(ncclProfiler_v7_t) == 6 * sizeof(void*));
ASSERT_LAYOUT(31, ncclProfileKernelLaunch == 0x800 && ncclProfileKernelPhase == 0x8000 && ncclProfileCollApi == 0x200);
ASSERT_LAYOUT(32, ncclProfilerGroupStartApiStop == 23 && ncclProfilerKernelPhaseStop == 31);
ASSERT_LAYOUT(33, NCCL_PROFILER_NET_TYPE_SOCK == 0x20000u);

int main(void) {
  ncclProfilerEventDescr_v7_t d = {0};
  d.type = ncclProfileColl;
  printf("nccl_profiler.h: C11 ok, descriptors v4 %u, v5 %u, v7 %u bytes\n",
         (unsigned)sizeof(ncclProfilerEventDescr_v4_t), (unsigned)sizeof(ncclProfilerEventDescr_v5_t),
         (unsigned)sizeof(d));
  return d.type == ncclProfileColl ? 0 : 1;
}
