// The host half of the device API (include/nccl_device.h, src/api/device_api.cc): teams of real communicators
// (threads here; hosts split by NCCL_HOSTID in tests/mp/device_api_hosts_test.cc), the team algebra against sets
// built by brute force, the requirement helpers, and ncclDevCommCreate's refusals by name: a host communicator,
// GIN, multimem, LL all-to-all slots; and device communicators of CUDA communicators on the fake driver (their
// kernels run in tests/devapi/device_kernels_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "nccl.h"
#include "nccl_device.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"

namespace braid_test {
namespace {

// The world ranks of team t seen from world rank `me`, in member order.
std::vector<int> members(ncclTeam t, int me) {
  std::vector<int> out;
  for (int i = 0; i < t.nRanks; ++i) out.push_back(me + (i - t.rank) * t.stride);
  return out;
}

bool hasText(const char* text, const char* want) {
  return std::string(text).find(want) != std::string::npos;
}

TEST(DeviceApi, TeamsOfThreadRanks) {
  const int n = 3;
  auto res = runThreads(n, [&](int r, ncclComm_t comm) -> ncclResult_t {
    ncclTeam w = ncclTeamWorld(comm);
    ncclTeam l = ncclTeamLsa(comm);
    ncclTeam rail = ncclTeamRail(comm);
    // One process is one host: the LSA team is everyone, the rail team just this rank.
    if (w.nRanks != n || w.rank != r || w.stride != 1) return ncclInternalError;
    if (l.nRanks != n || l.rank != r || l.stride != 1) return ncclInternalError;
    if (rail.nRanks != 1 || rail.rank != 0 || rail.stride != n) return ncclInternalError;
    for (int i = 0; i < n; ++i) {
      if (ncclTeamRankToWorld(comm, l, i) != i || ncclTeamRankToLsa(comm, w, i) != i) return ncclInternalError;
    }
    if (ncclTeamRankToWorld(comm, w, n) != -1 || ncclTeamRankToWorld(comm, w, -1) != -1) return ncclInternalError;
    // A made-up team whose stride overflows the world offset is not a member anywhere (no overflow).
    if (r == 0 && ncclTeamRankToWorld(comm, ncclTeam{3, 0, 1 << 30}, 2) != -1) return ncclInternalError;
    return ncclSuccess;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

TEST(DeviceApi, TeamsOfABadHandleAreEmpty) {
  ncclTeam t = ncclTeamWorld(nullptr);
  EXPECT_EQ(t.nRanks, 0);
  EXPECT_EQ(ncclTeamRankToWorld(nullptr, ncclTeam{1, 0, 1}, 0), -1);
  EXPECT_TRUE(hasText(ncclGetLastError(nullptr), "ncclTeamRankToWorld")) << ncclGetLastError(nullptr);
}

// Every pair of teams that are progressions inside a world of up to 12 ranks, from every world rank: the inline
// functions agree with the explicit sets.
TEST(DeviceApi, TeamAlgebraMatchesSets) {
  int checked = 0;
  for (int world = 1; world <= 12; ++world) {
    ncclTeam_t w{world, 0, 1};
    for (int me = 0; me < world; ++me) {
      w.rank = me;
      for (int inner = 1; inner <= world; ++inner) {
        if (world % inner != 0) continue;
        ncclTeam in = ncclTeamInnerFactor(w, inner);
        ncclTeam out = ncclTeamOuterFactor(w, inner);
        std::vector<int> inSet = members(in, me), outSet = members(out, me);
        ASSERT_EQ(static_cast<int>(inSet.size()), inner);
        for (int x : inSet) ASSERT_EQ(x / inner, me / inner) << "inner block of " << me;
        for (int x : outSet) ASSERT_EQ(x % inner, me % inner) << "outer of " << me;
        for (const ncclTeam& a : {in, out, w}) {
          for (const ncclTeam& b : {in, out, w}) {
            std::vector<int> as = members(a, me), bs = members(b, me);
            for (int i = 0; i < b.nRanks; ++i) {
              int wr = bs[static_cast<size_t>(i)];
              auto it = std::find(as.begin(), as.end(), wr);
              ASSERT_EQ(ncclTeamRankIsMember(a, b, i), it != as.end()) << world << " " << me << " " << inner;
              if (it != as.end()) {
                ASSERT_EQ(ncclTeamRankToTeam(a, b, i), it - as.begin());
              }
              ++checked;
            }
          }
          // parent minus subset, in parent order, for a subset of the parent.
          for (const ncclTeam& sub : {in, out}) {
            if (a.stride != 1) continue;
            std::vector<int> parent = members(a, me), subset = members(sub, me), diff;
            std::set<int> subs(subset.begin(), subset.end());
            bool inside = true;
            for (int x : subset) inside = inside && std::find(parent.begin(), parent.end(), x) != parent.end();
            if (!inside) continue;  // only defined for a subset
            for (int i = 0; i < a.nRanks; ++i) {
              if (!subs.count(parent[static_cast<size_t>(i)])) diff.push_back(i);
            }
            for (size_t k = 0; k < diff.size(); ++k) {
              ASSERT_EQ(ncclTeamRankInDifference(a, sub, static_cast<int>(k)), diff[k])
                  << "world " << world << " me " << me << " inner " << inner << " k " << k;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(DeviceApi, DevCommOverloadsMatchTheHandleFunctions) {
  ncclDevComm dc{};
  dc.rank = 5;
  dc.nRanks = 8;
  dc.lsaRank = 1;
  dc.lsaSize = 4;
  ncclTeam rail = ncclTeamRail(dc);
  EXPECT_EQ(rail.nRanks, 2);
  EXPECT_EQ(rail.rank, 1);
  EXPECT_EQ(rail.stride, 4);
  EXPECT_EQ(ncclTeamRankToWorld(dc, ncclTeamLsa(dc), 3), 7);
  EXPECT_EQ(ncclTeamRankToWorld(dc, rail, 0), 1);
  EXPECT_EQ(ncclTeamRankToLsa(dc, ncclTeamWorld(dc), 4), 0);
}

TEST(DeviceApi, RequirementHelpers) {
  ncclLsaBarrierHandle bh{};
  ncclDevResourceRequirements req{};
  req.ginSignalCount = 9;  // overwritten
  ASSERT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam{4, 1, 1}, 3, &bh, &req), ncclSuccess);
  EXPECT_EQ(bh.nBarriers, 3);
  EXPECT_EQ(req.bufferSize, 2u * 128u);  // 3 epoch words on one line, then 3 x 4 inbox words on another
  EXPECT_EQ(req.bufferAlign, 128u);
  EXPECT_EQ(req.outBufferHandle, &bh.bufHandle);
  EXPECT_EQ(req.ginSignalCount, 0);
  EXPECT_EQ(req.next, nullptr);
  ASSERT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam{64, 0, 1}, 1, &bh, &req), ncclSuccess);
  EXPECT_EQ(req.bufferSize, 128u + 256u);
  EXPECT_EQ(req.bufferSize, ncclBraidLsaBarrierBytes_(1, 64));
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam{4, 1, 1}, 0, &bh, &req), ncclInvalidArgument);
  EXPECT_TRUE(hasText(ncclGetLastError(nullptr), "nBarriers 0")) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam{4, 1, 1}, 1, nullptr, &req), ncclInvalidArgument);
  EXPECT_TRUE(hasText(ncclGetLastError(nullptr), "outHandle is NULL")) << ncclGetLastError(nullptr);

  EXPECT_EQ(ncclLLA2ACalcSlots(10, 4), 10);
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 8), 10);
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 9), 20);
  EXPECT_EQ(ncclLLA2ACalcSlots(-1, 4), -1);
  EXPECT_EQ(ncclLLA2ACalcSlots(1, 0), -1);
  ncclLLA2AHandle ah{};
  ASSERT_EQ(ncclLLA2ACreateRequirement(2, 5, &ah, &req), ncclSuccess);
  EXPECT_EQ(ah.nSlots, 5u);
  EXPECT_EQ(req.bufferSize, 2u * (1u + 2u * 5u) * 16u);  // per block: a header line, two halves
  EXPECT_EQ(req.outBufferHandle, &ah.bufHandle);
  EXPECT_EQ(ncclLLA2ACreateRequirement(2, 0, &ah, &req), ncclInvalidArgument);
  EXPECT_TRUE(hasText(ncclGetLastError(nullptr), "nSlots 0")) << ncclGetLastError(nullptr);
}

TEST(DeviceApi, QueryPropertiesSaysWhatThisCommunicatorSupports) {
  auto res = runThreads(2, [&](int r, ncclComm_t comm) -> ncclResult_t {
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    props.deviceApiSupport = true;  // overwritten
    if (ncclCommQueryProperties(comm, &props) != ncclSuccess) return ncclInternalError;
    if (props.rank != r || props.nRanks != 2 || props.cudaDev != -1 || props.deviceApiSupport ||
        props.multimemSupport || props.ginType != NCCL_GIN_TYPE_NONE || props.nLsaTeams != 1 || !props.hostRmaSupport ||
        props.commHash == 0) {
      return ncclInternalError;
    }
    // A layout of another release (larger here) gets the shared fields and zeros after them.
    struct Bigger {
      ncclCommProperties_t base;
      int extra;
    } big;
    std::memset(&big, 0x5a, sizeof(big));
    big.base.size = sizeof(big);
    big.base.magic = NCCL_API_MAGIC;
    if (ncclCommQueryProperties(comm, &big.base) != ncclSuccess) return ncclInternalError;
    if (big.base.rank != r || big.base.deviceApiSupport || big.extra != 0 || big.base.nLsaTeams != 0) {
      return ncclInternalError;
    }
    ncclCommProperties_t bad{};
    if (ncclCommQueryProperties(comm, &bad) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "NCCL_COMM_PROPERTIES_INITIALIZER")) return ncclInternalError;
    bad.magic = NCCL_API_MAGIC;
    bad.size = 8;
    if (ncclCommQueryProperties(comm, &bad) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "props->size 8")) return ncclInternalError;
    return ncclCommQueryProperties(comm, nullptr) == ncclInvalidArgument ? ncclSuccess : ncclInternalError;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

TEST(DeviceApi, DevCommCreateRefusesAHostCommunicatorByName) {
  auto res = runThreads(2, [&](int, ncclComm_t comm) -> ncclResult_t {
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    ncclDevComm dc{};
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "is a host communicator")) return ncclInternalError;
    if (ncclDevCommCreate(comm, nullptr, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "reqs is NULL")) return ncclInternalError;
    if (ncclDevCommDestroy(comm, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "was not created by ncclDevCommCreate")) return ncclInternalError;
    // The GIN barrier requirement is host arithmetic: n signals per barrier, numbered at ncclDevCommCreate.
    ncclGinBarrierHandle gh{};
    ncclDevResourceRequirements req{};
    req.bufferSize = 99;  // overwritten
    if (ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), 3, &gh, &req) != ncclSuccess) {
      return ncclInternalError;
    }
    if (req.ginSignalCount != 6 || req.outGinSignalStart != &gh.signal0 || req.bufferSize != 0)
      return ncclInternalError;
    if (ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), 0, &gh, &req) != ncclInvalidArgument) {
      return ncclInternalError;
    }
    if (!hasText(ncclGetLastError(comm), "nBarriers 0: at least 1")) return ncclInternalError;
    if (ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), 1, &gh, nullptr) != ncclInvalidArgument) {
      return ncclInternalError;
    }
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// A CUDA communicator gets device communicators (their kernels run in tests/devapi); what braid does not build is
// refused by name, on every rank alike.
TEST(DeviceApi, DevCommCreateOnACudaCommunicatorBuildsOrSaysWhatIsMissing) {
  if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  auto res = runCudaRanks(2, [&](int, ncclComm_t comm, cudaStream_t) -> ncclResult_t {
    ncclDevComm dc{};
    // NCCL 2.29+'s versioned requirements: a zeroed struct, or one from another header, is refused by name.
    ncclDevCommRequirements reqs{};
    reqs.lsaBarrierCount = 1;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "initialise reqs with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER")) {
      return ncclInternalError;
    }
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    if (reqs.size != sizeof(reqs) || reqs.version != NCCL_VERSION_CODE || reqs.ginContextCount != 4 ||
        reqs.ginTrafficClass != NCCL_CONFIG_UNDEF_INT || !reqs.ginStrongSignalsRequired || !reqs.ginVaSignalsRequired ||
        reqs.ginCustomStride != 1 || reqs.cftCaps != NCCL_CFT_NONE) {
      return ncclInternalError;
    }
    for (unsigned version : {23005u, NCCL_VERSION_CODE + 1u}) {  // before versioned braid headers, and a newer one
      reqs.version = version;
      if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
      const std::string want = "made by a header of version " + std::to_string(version);
      if (!hasText(ncclGetLastError(comm), want.c_str())) {
        return ncclInternalError;
      }
    }
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.size -= 8;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "compile device-API code against the nccl_device.h")) {
      return ncclInternalError;
    }
    // GIN: the world is one LSA team here, so whichever field asks for it gets contexts (the kernels run in
    // tests/devapi/gin_kernels_test.cc); a named backend is refused, and negative counts.
    for (int field = 0; field < 5; ++field) {
      reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
      reqs.ginContextCount = 0;
      if (field == 0) reqs.ginSignalCount = 4;
      if (field == 1) reqs.worldGinBarrierCount = 1;
      if (field == 2) reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
      if (field == 3) reqs.ginCounterCount = 2;
      if (field == 4) reqs.ginForceEnable = true;
      if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess || dc.ginContextCount != 1) return ncclInternalError;
      const uint32_t signals = field == 0 ? 4 : field == 1 ? 2 : 0;
      if (dc.ginSignalCount != signals || dc.ginCounterCount != (field == 3 ? 2u : 0u)) return ncclInternalError;
      if (ncclDevCommDestroy(comm, &dc) != ncclSuccess) return ncclInternalError;
    }
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.ginType = NCCL_GIN_TYPE_GDAKI;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "reqs->ginType 3 asks for a GIN backend braid does not have")) {
      return ncclInternalError;
    }
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.ginCounterCount = -1;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "ginCounterCount -1")) return ncclInternalError;
    ncclDevResourceRequirements negative{};
    negative.ginSignalCount = -2;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.resourceRequirementsList = &negative;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "asks for -2 GIN signals")) return ncclInternalError;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.ginSignalCount = (1 << 24) + 1;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "GIN signals and 0 counters in all")) return ncclInternalError;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.cftCaps = NCCL_CFT | NCCL_CFT_MULTIMEM;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "cftCaps 0x3") || !hasText(ncclGetLastError(comm), "braid has no CFT")) {
      return ncclInternalError;
    }
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.cftBarrierCount = 2;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "cftBarrierCount 2")) return ncclInternalError;
    // A cycle in a requirement list is an error, not a hang.
    ncclDevResourceRequirements loop{};
    loop.next = &loop;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.resourceRequirementsList = &loop;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "(a cycle?)")) return ncclInternalError;
    // Multicast covers the LSA team (tests/devapi/multimem_kernels_test.cc): a team requirement for another team
    // is refused by name.
    ncclTeamRequirements self{};
    self.team = ncclTeam{1, 0, 1};
    self.multimem = true;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.teamRequirementsList = &self;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "covers the LSA team (2 ranks, stride 1) only")) return ncclInternalError;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.lsaLLA2ABlockCount = 2;
    reqs.lsaLLA2ASlotCount = 8;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "no built-in LL all-to-all")) return ncclInternalError;
    ncclDevResourceRequirements odd{};
    odd.bufferSize = 64;
    odd.bufferAlign = 384;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.resourceRequirementsList = &odd;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "bufferAlign 384 must be a power of two")) return ncclInternalError;
    // What works: barriers (barrierCount too, since the world is one LSA team here) and a buffer.
    ncclDevResourceHandle h = 99;
    ncclDevResourceRequirements buf{};
    buf.bufferSize = 1000;
    buf.outBufferHandle = &h;
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.lsaBarrierCount = 2;
    reqs.barrierCount = 3;
    reqs.ginContextCount = 8;  // hints that shape GIN resources (at most 4 contexts), not GIN requests
    reqs.ginQueueDepth = 64;
    reqs.ginTrafficClass = 3;
    reqs.ginExclusiveContexts = true;
    reqs.useRuntimeVersion = true;
    reqs.resourceRequirementsList = &buf;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) return ncclInternalError;
    if (dc.lsaBarrier.nBarriers != 3 || dc.lsaSize != 2 || dc.resourceWindow == nullptr || dc.abortFlag == nullptr ||
        dc.ginContextCount != 4 || dc.ginSignalCount != 3 || dc.railGinBarrier.signal0 != 0) {
      return ncclInternalError;
    }
    if (ncclGetResourceBufferOffset(h) < ncclBraidLsaBarrierBytes_(3, 2)) return ncclInternalError;
    void* user = nullptr;  // the resource window is a window of the communicator
    if (ncclWinGetUserPtr(comm, dc.resourceWindow, &user) != ncclSuccess || user == nullptr) return ncclInternalError;
    ncclDevComm other = dc;
    other.braidState = &other;
    if (ncclDevCommDestroy(comm, &other) != ncclInvalidArgument) return ncclInternalError;
    if (ncclDevCommDestroy(comm, &dc) != ncclSuccess) return ncclInternalError;
    if (ncclDevCommDestroy(comm, &dc) != ncclInvalidArgument) return ncclInternalError;
    if (!hasText(ncclGetLastError(comm), "was destroyed already")) return ncclInternalError;
    // A device communicator left undestroyed goes with the communicator.
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.lsaBarrierCount = 1;
    if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) return ncclInternalError;
    ncclTeam l = ncclTeamLsa(comm);
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    if (ncclCommQueryProperties(comm, &props) != ncclSuccess || props.cudaDev < 0 || !props.deviceApiSupport ||
        props.devCommRuntimeVersionSize != sizeof(ncclDevComm)) {
      return ncclInternalError;
    }
    return l.nRanks == 2 ? ncclSuccess : ncclInternalError;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

}  // namespace
}  // namespace braid_test
