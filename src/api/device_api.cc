// The host half of NCCL's device API (include/nccl_device.h): teams, requirement helpers, and device
// communicators (src/core/dev_comms.h builds them; what kernels do with them is in the headers' device half).
// ncclDevCommCreate checks the arguments here and refuses by name what braid does not build (host communicators,
// GIN across LSA teams, CFT, multimem without multicast), and numbers the GIN signals and counters.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>

#include "include/nccl_device.h"
#include "src/api/api.h"
#include "src/api/gin_net.h"
#include "src/common/params.h"
#include "src/core/comm_topo.h"
#include "src/core/dev_comms.h"
#include "src/core/group.h"
#include "src/core/teams.h"
#include "src/core/window_directory.h"
#include "src/core/windows.h"

namespace braid {
namespace {

static_assert(sizeof(ncclTeam) == sizeof(Team) && offsetof(ncclTeam, nRanks) == offsetof(Team, nRanks) &&
                  offsetof(ncclTeam, rank) == offsetof(Team, rank) &&
                  offsetof(ncclTeam, stride) == offsetof(Team, stride),
              "the core's Team is nccl_device's ncclTeam");

#define BRAID_SAME_FIELD_(f) offsetof(ncclWindow_vidmem, f) == offsetof(WindowDescriptor, f)
static_assert(sizeof(ncclWindow_vidmem) == sizeof(WindowDescriptor) && BRAID_SAME_FIELD_(winHost) &&
                  BRAID_SAME_FIELD_(localBase) && BRAID_SAME_FIELD_(lsaBases) && BRAID_SAME_FIELD_(size) &&
                  BRAID_SAME_FIELD_(worldRank) && BRAID_SAME_FIELD_(lsaRank) && BRAID_SAME_FIELD_(lsaSize) &&
                  BRAID_SAME_FIELD_(braidMagic) && BRAID_SAME_FIELD_(lsaMultimem) && BRAID_SAME_FIELD_(registration),
              "the core's WindowDescriptor is nccl_device's ncclWindow_vidmem");
#undef BRAID_SAME_FIELD_
static_assert(sizeof(ncclDevCommWindowTable) == sizeof(WindowTable::Chunk) &&
                  offsetof(ncclDevCommWindowTable, next) == offsetof(WindowTable::Chunk, next) &&
                  sizeof(ncclDevCommWindowEntry) == sizeof(WindowTable::Entry) &&
                  offsetof(ncclDevCommWindowEntry, window) == offsetof(WindowTable::Entry, window) &&
                  NCCL_DEV_COMM_WINDOW_TABLE_ENTRIES == WindowTable::kPerChunk,
              "the core's WindowTable chunk is nccl_device's ncclDevCommWindowTable");
static_assert(DevComms::kHandleUnit == 128, "ncclGetResourceBufferOffset counts 128-byte units");

constexpr size_t kLsaBarrierLine = 128;  // a barrier's epoch words live on their own lines (no false sharing)
constexpr size_t kA2aLineBytes = 16;     // one LL slot: 8 data bytes, 8 flag bytes
constexpr int kLlMaxEltSize = 1 << 20;
constexpr int kMaxListEntries = 1 << 16;  // requirement list entries ncclDevCommCreate walks
constexpr int64_t kMaxGinIds = 1 << 24;   // GIN signals (or counters) of one device communicator

ncclTeam toNccl(const Team& t) {
  return ncclTeam{t.nRanks, t.rank, t.stride};
}

// The team functions return values, not ncclResult_t: a bad handle gives a zero team (or -1) and the WARN.
template <typename T, typename F>
T teamCall(const char* fn, ncclComm_t comm, T onError, F&& body) {
  T out = onError;
  ncclResult_t rc = apiCall(fn, [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    out = body(*c);
    return Status::ok();
  });
  return rc == ncclSuccess ? out : onError;
}

// Member `rank` of `from` as a member of `target`, or -1 when it is not one.
int rankIn(const Team& target, const ncclTeam& from, int rank) {
  ncclTeam t = toNccl(target);
  if (rank < 0 || rank >= from.nRanks || from.stride == 0) return -1;
  // A team made up by the caller may have any stride: keep the world offset inside int.
  const int64_t delta = (int64_t(rank) - from.rank) * from.stride;
  if (delta > std::numeric_limits<int>::max() || delta < std::numeric_limits<int>::min()) return -1;
  if (!ncclTeamRankIsMember(t, from, rank)) return -1;
  return ncclTeamRankToTeam(t, from, rank);
}

// Whether reqs asks for GIN itself; the fields that only shape GIN resources (contexts, queue depth, traffic class,
// signal kinds, stride) do not count.
bool wantsGin(const Communicator& c, const ncclDevCommRequirements& reqs) {
  bool list = false;
  int entries = 0;
  for (const ncclDevResourceRequirements* r = reqs.resourceRequirementsList; r && ++entries <= kMaxListEntries;
       r = r->next) {
    list = list || r->ginSignalCount != 0 || r->ginCounterCount != 0;
  }
  // Hybrid barriers over a world of several LSA teams sync the rail team by GIN.
  const bool hybrid = reqs.barrierCount != 0 && lsaTeam(c).nRanks != c.nranks();
  return list || hybrid || reqs.ginForceEnable || reqs.ginSignalCount != 0 || reqs.ginCounterCount != 0 ||
         reqs.railGinBarrierCount != 0 || reqs.worldGinBarrierCount != 0 ||
         reqs.ginConnectionType != NCCL_GIN_CONNECTION_NONE;
}

// GIN ids of a device communicator: signals and counters numbered in NCCL's order (the requirements' own first, then
// each resource requirement's, then the rail and world barriers'), and the contexts given.
struct GinLayout {
  int contexts = 0;
  int64_t signals = 0, counters = 0;
  int railBarriers = 0;
  ncclGinBarrierHandle_t rail{}, world{};
};

// The device communicator's network GIN (gin_net.h), attached to its record: every rank starts its proxy and
// registers its signal words before they agree, so no rank's kernel sends to a rank not ready for it. On failure the
// device communicator is destroyed on every rank.
Result<ncclBraidGinNet*> startGinNet(Communicator& c, const DevCommMade& made, int64_t signals, int64_t counters) {
  Result<const Window*> w = c.windows().find(made.window, "the resource window");
  RmaNet* net = c.windows().messenger();
  Result<std::unique_ptr<GinNet>> g =
      !w.isOk() ? Result<std::unique_ptr<GinNet>>(w.status())
      : net == nullptr
          ? Result<std::unique_ptr<GinNet>>(invalidUsage(
                "no one-sided messages to the ranks of other hosts (the first window registration connects them unless "
                "BRAID_RMA_NET=0)"))
          : GinNet::create(&c, net, w.value()->index, static_cast<uint32_t>(signals), static_cast<uint32_t>(counters));
  Status agreed = c.bootstrap()->agreeAllOrNothing(g.status(), "starting network GIN", [](int q, const Status& theirs) {
    return invalidUsage("rank %d could not start its network GIN: %s", q, theirs.message().c_str());
  });
  if (!agreed.isOk()) {
    if (g.isOk()) g.take().reset();
    (void)c.devComms().destroy(made.record, made.window);
    return agreed;
  }
  std::shared_ptr<GinNet> held(g.take());
  ncclBraidGinNet* device = held->device();
  c.devComms().attach(made.record, std::move(held));
  return device;
}

Result<GinLayout> ginLayout(const Communicator& c, const ncclDevCommRequirements& reqs) {
  GinLayout g;
  // Several LSA teams: GIN (by proxy) only when asked for and possible (else a request for it was refused).
  const bool wanted = wantsGin(c, reqs);
  if (lsaTeam(c).nRanks != c.nranks() && (!wanted || !ginNetRefusal(c).empty())) return g;
  g.contexts = std::min(std::max(reqs.ginContextCount, wanted ? 1 : 0), NCCL_GIN_MAX_CONTEXTS);
  if (g.contexts == 0) return g;
  g.signals = reqs.ginSignalCount;
  g.counters = reqs.ginCounterCount;
  for (const ncclDevResourceRequirements* r = reqs.resourceRequirementsList; r != nullptr; r = r->next) {
    g.signals += r->ginSignalCount;
    g.counters += r->ginCounterCount;
  }
  // The world form of ncclBarrierSession syncs the rail team by GIN barrier: as many as the world's barriers.
  g.railBarriers = std::max(reqs.railGinBarrierCount, reqs.barrierCount);
  g.rail.signal0 = static_cast<ncclGinSignal_t>(g.signals);
  g.signals += int64_t(g.railBarriers) * railTeam(c).nRanks;
  g.world.signal0 = static_cast<ncclGinSignal_t>(g.signals);
  g.signals += int64_t(reqs.worldGinBarrierCount) * c.nranks();
  if (g.signals > kMaxGinIds || g.counters > kMaxGinIds) {
    return invalidArgument("reqs asks for %lld GIN signals and %lld counters in all: at most %lld of each",
                           static_cast<long long>(g.signals), static_cast<long long>(g.counters),
                           static_cast<long long>(kMaxGinIds));
  }
  return g;
}

// braid's GIN signals are atomic adds on the LSA members' GPU memory: each LSA member must be on this GPU or reach
// it with native peer atomics, which the driver says for every GPU this process sees (another process's too, by its
// PCI identity). A member's GPU this process does not see cannot be asked about: INFO says what GIN assumes there.
Status ginAtomicsHere(Communicator& c, const Team& lsa) {
  const PeerInfo& me = c.peer(c.rank());
  const int first = c.rank() - lsa.rank;
  for (int m = 0; m < lsa.nRanks; ++m) {
    const PeerInfo& p = c.peer(first + m);
    if (first + m == c.rank()) continue;
    BRAID_ASSIGN_OR_RETURN(const int native, c.backend().peerAtomics(p.gpuPciId));
    if (native < 0) {
      BRAID_INFO(kLogInit,
                 "rank %d: GIN signals to rank %d assume native peer atomics between the GPUs (NVLink or NVSwitch): "
                 "this process does not see that rank's GPU (%s) to ask the driver",
                 c.rank(), p.rank, gpuBusId(p.gpuPciId).c_str());
    } else if (native == 0) {
      return invalidUsage(
          "the GPU of rank %d (%s) has no native peer atomics with the GPU of rank %d (%s) (cuDeviceGetP2PAttribute "
          "NATIVE_ATOMIC_SUPPORTED is 0), and braid's GIN signals are atomic adds on peers' memory: GIN needs NVLink "
          "or links that carry atomics",
          c.rank(), gpuBusId(me.gpuPciId).c_str(), p.rank, gpuBusId(p.gpuPciId).c_str());
    }
  }
  return Status::ok();
}

// The first braid header whose requirements carry size/magic/version (NCCL 2.29's scheme).
constexpr unsigned kFirstVersionedRequirements = 23102;

// NCCL 2.29+'s rule: requirements come from the initializer. braid has had one versioned layout so far, so a struct
// from any braid header since the first versioned one, up to this library's version, has this size; a later braid
// that grows the struct reads the older sizes here. This cannot tell braid's headers from NVIDIA's of the same
// version and layout (their ncclDevComm differs): building kernels against the installed braid headers is what
// protects a program from that, as the header says.
Status checkRequirementsHeader(const ncclDevCommRequirements* reqs) {
  if (reqs->magic != NCCL_API_MAGIC) {
    return invalidUsage(
        "reqs->magic is 0x%x, not 0x%x: initialise reqs with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (since NCCL "
        "2.29 a zeroed ncclDevCommRequirements is refused)",
        reqs->magic, NCCL_API_MAGIC);
  }
  if (reqs->version < kFirstVersionedRequirements || reqs->version > NCCL_VERSION_CODE ||
      reqs->size != sizeof(ncclDevCommRequirements)) {
    return invalidUsage(
        "reqs was made by a header of version %u (a %zu-byte ncclDevCommRequirements); this library reads versions "
        "%u to %d (%zu bytes): compile device-API code against the nccl_device.h installed with this braid (its "
        "ncclDevComm layout is braid's)",
        reqs->version, reqs->size, kFirstVersionedRequirements, NCCL_VERSION_CODE, sizeof(ncclDevCommRequirements));
  }
  return Status::ok();
}

Status checkDevRequirements(Communicator& c, const ncclDevCommRequirements* reqs) {
  BRAID_RETURN_IF_ERROR(checkRequirementsHeader(reqs));
  if (c.backend().kind() != BackendKind::kCuda) {
    return invalidUsage(
        "comm (rank %d of %d) is a host communicator: the device API runs in CUDA kernels and needs a CUDA "
        "communicator (a current CUDA context at init, or BRAID_BACKEND=cuda)",
        c.rank(), c.nranks());
  }
  // braid's GIN is load/store among one LSA team's ranks (include/nccl_device/gin.h), and by proxy toward ranks of
  // other hosts (gin_net.h); a named backend other than the proxy is one braid does not have.
  const Team lsaOfWorld = lsaTeam(c);
  if (wantsGin(c, *reqs) && lsaOfWorld.nRanks != c.nranks()) {
    const std::string why = ginNetRefusal(c);
    if (!why.empty()) {
      return invalidUsage(
          "reqs asks for GIN (ginForceEnable %d, ginSignalCount %d, ginCounterCount %d, railGinBarrierCount %d, "
          "worldGinBarrierCount %d, barrierCount %d, ginConnectionType %d, or GIN in a resource requirement), and "
          "this world spans %d LSA teams: braid's GIN reaches ranks outside the LSA team by proxy only where they are "
          "on other hosts, but %s",
          reqs->ginForceEnable ? 1 : 0, reqs->ginSignalCount, reqs->ginCounterCount, reqs->railGinBarrierCount,
          reqs->worldGinBarrierCount, reqs->barrierCount, static_cast<int>(reqs->ginConnectionType),
          c.nranks() / lsaOfWorld.nRanks, why.c_str());
    }
  }
  if (reqs->ginType != NCCL_GIN_TYPE_NONE && reqs->ginType != NCCL_GIN_TYPE_PROXY) {
    return invalidUsage(
        "reqs->ginType %d asks for a GIN backend braid does not have (its GIN is load/store within one LSA team and "
        "by proxy toward other hosts); leave NCCL_GIN_TYPE_NONE (any backend) or ask for NCCL_GIN_TYPE_PROXY",
        static_cast<int>(reqs->ginType));
  }
  if (reqs->ginSignalCount < 0 || reqs->ginCounterCount < 0 || reqs->railGinBarrierCount < 0 ||
      reqs->worldGinBarrierCount < 0) {
    return invalidArgument(
        "reqs has a negative GIN count (ginSignalCount %d, ginCounterCount %d, railGinBarrierCount %d, "
        "worldGinBarrierCount %d)",
        reqs->ginSignalCount, reqs->ginCounterCount, reqs->railGinBarrierCount, reqs->worldGinBarrierCount);
  }
  if (reqs->cftCaps != NCCL_CFT_NONE || reqs->cftBarrierCount != 0) {
    return invalidUsage(
        "reqs asks for Compute Fabric Transport (cftCaps 0x%x, cftBarrierCount %d): braid has no CFT; leave these 0",
        static_cast<unsigned>(reqs->cftCaps), reqs->cftBarrierCount);
  }
  // The lists are the caller's linked lists: a cycle must end in an error, not a hang.
  int entries = 0;
  for (const ncclDevResourceRequirements* r = reqs->resourceRequirementsList; r; r = r->next) {
    if (++entries > kMaxListEntries) {
      return invalidArgument("reqs->resourceRequirementsList has more than %d entries (a cycle?)", kMaxListEntries);
    }
    if (r->ginSignalCount < 0 || r->ginCounterCount < 0) {
      return invalidArgument("a resource requirement asks for %d GIN signals and %d counters: counts are at least 0",
                             r->ginSignalCount, r->ginCounterCount);
    }
  }
  entries = 0;
  const Team lsa = lsaTeam(c);
  for (const ncclTeamRequirements* t = reqs->teamRequirementsList; t; t = t->next) {
    if (++entries > kMaxListEntries) {
      return invalidArgument("reqs->teamRequirementsList has more than %d entries (a cycle?)", kMaxListEntries);
    }
    // One multicast mapping per window, over the LSA team: a team requirement can ask for it only for that team.
    if (t->multimem && (t->team.nRanks != lsa.nRanks || t->team.rank != lsa.rank || t->team.stride != lsa.stride)) {
      return invalidUsage(
          "a team requirement asks for multimem over a team of %d ranks (rank %d, stride %d): braid's multicast "
          "covers the LSA team (%d ranks, stride %d) only",
          t->team.nRanks, t->team.rank, t->team.stride, lsa.nRanks, lsa.stride);
    }
  }
  if (reqs->barrierCount < 0 || reqs->lsaBarrierCount < 0 || reqs->lsaLLA2ABlockCount < 0 ||
      reqs->lsaLLA2ASlotCount < 0) {
    return invalidArgument(
        "reqs has a negative count (barrierCount %d, lsaBarrierCount %d, lsaLLA2ABlockCount %d, "
        "lsaLLA2ASlotCount %d)",
        reqs->barrierCount, reqs->lsaBarrierCount, reqs->lsaLLA2ABlockCount, reqs->lsaLLA2ASlotCount);
  }
  return Status::ok();
}

// What reqs asks for as the core's request, the device communicator made, and the ncclDevComm kernels get.
Status createDevComm(Communicator& c, const ncclDevCommRequirements& reqs, ncclDevComm* out) {
  const Team lsa = lsaTeam(c);
  if (reqs.lsaLLA2ABlockCount != 0 || reqs.lsaLLA2ASlotCount != 0) {
    return invalidUsage(
        "reqs asks for LL all-to-all slots (lsaLLA2ABlockCount %d, lsaLLA2ASlotCount %d): braid's ncclDevComm has no "
        "built-in LL all-to-all; make one with ncclLLA2ACreateRequirement in resourceRequirementsList, and leave "
        "these 0",
        reqs.lsaLLA2ABlockCount, reqs.lsaLLA2ASlotCount);
  }
  // The world's hybrid barriers: their LSA halves (the rail team's GIN halves are in ginLayout).
  const int nBarriers = std::max(reqs.lsaBarrierCount, reqs.barrierCount);
  DevCommRequest req;
  for (const ncclTeamRequirements* t = reqs.teamRequirementsList; t != nullptr; t = t->next) {
    req.multimem = req.multimem || t->multimem;
  }
  req.multimem = req.multimem || reqs.lsaMultimem;
  req.barrierBytes = nBarriers > 0 ? ncclBraidLsaBarrierBytes_(nBarriers, lsa.nRanks) : 0;
  for (const ncclDevResourceRequirements* r = reqs.resourceRequirementsList; r != nullptr; r = r->next) {
    req.buffers.push_back(DevCommRequest::Buffer{r->bufferSize, r->bufferAlign});
  }
  BRAID_ASSIGN_OR_RETURN(GinLayout gin, ginLayout(c, reqs));
  if (gin.contexts > 0 && lsa.nRanks > 1) {
    const Status atomics = c.bootstrap()->agreeAllOrNothing(
        ginAtomicsHere(c, lsa), "agreeing on GIN",
        [](int q, const Status& theirs) { return invalidUsage("rank %d: %s", q, theirs.message().c_str()); });
    if (!atomics.isOk() && wantsGin(c, reqs)) return atomics;
    if (!atomics.isOk()) gin = GinLayout{};  // asked for none: the device communicator just has no GIN
  }
  // Three arrays of 64-bit words after the requested buffers: signals, counters, signal shadows (gin.h).
  const size_t firstGin = req.buffers.size();
  for (int64_t words : {gin.signals, gin.counters, gin.signals}) {
    if (gin.contexts > 0) req.buffers.push_back(DevCommRequest::Buffer{size_t(words) * 8, 0});
  }
  BRAID_ASSIGN_OR_RETURN(DevCommMade made, c.devComms().create(req));
  ncclBraidGinNet* ginNet = nullptr;
  if (gin.contexts > 0 && lsa.nRanks != c.nranks()) {
    BRAID_ASSIGN_OR_RETURN(ginNet, startGinNet(c, made, gin.signals, gin.counters));
  }
  auto handleOf = [&](size_t i) {
    return static_cast<ncclDevResourceHandle_t>(made.offsets[i] / DevComms::kHandleUnit);
  };
  size_t i = 0;
  int64_t signal = reqs.ginSignalCount, counter = reqs.ginCounterCount;
  for (const ncclDevResourceRequirements* r = reqs.resourceRequirementsList; r != nullptr; r = r->next, ++i) {
    if (r->outBufferHandle != nullptr) *r->outBufferHandle = handleOf(i);
    if (r->outGinSignalStart != nullptr) *r->outGinSignalStart = static_cast<ncclGinSignal_t>(signal);
    if (r->outGinCounterStart != nullptr) *r->outGinCounterStart = static_cast<ncclGinCounter_t>(counter);
    signal += r->ginSignalCount;
    counter += r->ginCounterCount;
  }
  ncclDevComm dc{};
  dc.rank = c.rank();
  dc.nRanks = c.nranks();
  dc.lsaRank = lsa.rank;
  dc.lsaSize = lsa.nRanks;
  dc.ginContextCount = static_cast<uint8_t>(gin.contexts);
  dc.ginSignalCount = static_cast<uint32_t>(gin.signals);
  dc.ginCounterCount = static_cast<uint32_t>(gin.counters);
  if (gin.contexts > 0) {
    dc.ginSignals = handleOf(firstGin);
    dc.ginCounters = handleOf(firstGin + 1);
    dc.ginShadows = handleOf(firstGin + 2);
  }
  dc.railGinBarrier = gin.rail;
  dc.worldGinBarrier = gin.world;
  dc.ginNet = ginNet;
  dc.resourceWindow = made.window;
  dc.lsaBarrier.bufHandle = 0;  // the barriers come first
  dc.lsaBarrier.nBarriers = nBarriers;
  dc.lsaMultimem.mcBasePtr = nullptr;
  if (req.multimem) {
    // The resource window's mapping stands for the handle; each window carries its own (ncclGetMultimemPointer).
    // Whether it exists is agreed on every rank, so all return the same.
    Result<const Window*> w = c.windows().find(made.window, "the resource window");
    Status st = w.status();
    if (st.isOk() && w.value()->mc.base == nullptr) {
      st = invalidUsage(
          "reqs asks for multimem (NVLS multicast over the LSA team), which this communicator cannot "
          "give: %s",
          w.value()->mcWhy.c_str());
    }
    if (!st.isOk()) {
      (void)c.devComms().destroy(made.record, made.window);
      return st;
    }
    dc.lsaMultimem.mcBasePtr = w.value()->mc.base;
    for (const ncclTeamRequirements* t = reqs.teamRequirementsList; t != nullptr; t = t->next) {
      if (t->multimem && t->outMultimemHandle != nullptr) *t->outMultimemHandle = dc.lsaMultimem;
    }
  }
  dc.abortFlag = c.backend().deviceAbortWord();
  dc.windowTable = static_cast<ncclDevCommWindowTable*>(const_cast<void*>(made.windowTable));
  dc.braidState = const_cast<void*>(made.record);
  *out = dc;
  return Status::ok();
}

}  // namespace

BRAID_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties_t* props) {
  return apiCall("ncclCommQueryProperties", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(props, "ncclCommQueryProperties", "props"));
    if (props->magic != NCCL_API_MAGIC) {
      return invalidUsage("props->magic is 0x%x, not 0x%x: initialise props with NCCL_COMM_PROPERTIES_INITIALIZER",
                          props->magic, NCCL_API_MAGIC);
    }
    // Every NCCL release's layout starts with these fields; later ones differ (ginType's width, for one).
    constexpr size_t kShared = offsetof(ncclCommProperties, multimemSupport) + sizeof(bool);
    constexpr size_t kHeader = offsetof(ncclCommProperties, rank);
    if (props->size < kShared) {
      return invalidArgument("props->size %zu is smaller than the %zu bytes every ncclCommProperties_t has",
                             props->size, kShared);
    }
    ncclCommProperties mine{};
    mine.rank = c->rank();
    mine.nRanks = c->nranks();
    mine.cudaDev = c->device();
    mine.nvmlDev = -1;
    mine.deviceApiSupport = c->backend().kind() == BackendKind::kCuda;
    const Team lsa = lsaTeam(*c);
    mine.multimemSupport = c->backend().caps().multicast && lsa.nRanks == c->nranks();
    // GIN reaches other LSA teams by proxy where they are on other hosts (gin_net.h); within one, by load/store.
    mine.ginType = lsa.nRanks != c->nranks() && ginNetRefusal(*c).empty() ? NCCL_GIN_TYPE_PROXY : NCCL_GIN_TYPE_NONE;
    mine.nLsaTeams = c->nranks() / lsa.nRanks;
    // Ranks of other hosts are reached by messages (rma_net.h), those of this host by load/store (the LSA team; on
    // a host communicator every rank of the host).
    int onThisHost = 0;
    for (int q = 0; q < c->nranks(); ++q) onThisHost += c->peer(q).hostHash == c->peer(c->rank()).hostHash ? 1 : 0;
    const bool hostReached = c->backend().kind() == BackendKind::kHost || lsa.nRanks == onThisHost;
    mine.hostRmaSupport =
        c->config().numRmaCtx > 0 && (lsa.nRanks == c->nranks() || (params::RmaNet() != 0 && hostReached));
    mine.railedGinType = NCCL_GIN_TYPE_NONE;
    mine.commHash = c->flight().commId();
    mine.ginMinStride = 0;
    mine.ginConnectionType = NCCL_GIN_CONNECTION_NONE;
    mine.devCommRuntimeVersionSize = sizeof(ncclDevComm);
    char* out = reinterpret_cast<char*>(props);
    const char* in = reinterpret_cast<const char*>(&mine);
    if (props->size == sizeof(ncclCommProperties)) {
      std::memcpy(out + kHeader, in + kHeader, sizeof(mine) - kHeader);
    } else {
      std::memset(out + kShared, 0, props->size - kShared);
      std::memcpy(out + kHeader, in + kHeader, kShared - kHeader);
    }
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
          ncclDevComm_t* outDevComm) {
  return apiCall("ncclDevCommCreate", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(reqs, "ncclDevCommCreate", "reqs"));
    BRAID_RETURN_IF_ERROR(checkNotNull(outDevComm, "ncclDevCommCreate", "outDevComm"));
    BRAID_RETURN_IF_ERROR(checkDevRequirements(*c, reqs));
    return createDevComm(*c, *reqs, outDevComm);
  });
}

BRAID_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, ncclDevComm_t const* devComm) {
  return apiCall("ncclDevCommDestroy", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(devComm, "ncclDevCommDestroy", "devComm"));
    return c->devComms().destroy(devComm->braidState, devComm->resourceWindow);
  });
}

namespace {

// LSA member lsaRank's byte `offset` of the window `v` views; errors name the member as rankArg rankValue.
Result<void*> lsaPointer(const WindowView& v, size_t offset, int lsaRank, const char* rankArg, int rankValue) {
  const size_t i = static_cast<size_t>(lsaRank);
  if (offset >= v.lsaBytes[i]) {
    return invalidArgument("offset=%zu is not inside %s %d's window buffer (%llu bytes)", offset, rankArg, rankValue,
                           static_cast<unsigned long long>(v.lsaBytes[i]));
  }
  if (v.lsaBases[i] == nullptr) {
    return invalidUsage("%s %d's window buffer is out of rank %d's load/store reach: %s", rankArg, rankValue,
                        v.worldRank, v.why[i].c_str());
  }
  return static_cast<void*>(v.lsaBases[i] + offset);
}

Result<void*> multimemPointer(const WindowView& v, size_t offset) {
  if (v.multimem == nullptr) return static_cast<void*>(nullptr);
  if (offset >= v.multimemBytes) {
    return invalidArgument("offset=%zu is not inside the window's multicast mapping (%llu bytes)", offset,
                           static_cast<unsigned long long>(v.multimemBytes));
  }
  return static_cast<void*>(v.multimem + offset);
}

}  // namespace

BRAID_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  return apiCall("ncclGetLsaDevicePointer", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(outPtr, "ncclGetLsaDevicePointer", "outPtr"));
    BRAID_ASSIGN_OR_RETURN(WindowView v, lookupWindow(window, "window"));
    if (lsaRank < 0 || lsaRank >= v.lsa.nRanks) {
      return invalidArgument("lsaRank=%d is not a member of the window's LSA team (0..%d)", lsaRank, v.lsa.nRanks - 1);
    }
    BRAID_ASSIGN_OR_RETURN(*outPtr, lsaPointer(v, offset, lsaRank, "LSA member", lsaRank));
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  return apiCall("ncclGetPeerDevicePointer", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(outPtr, "ncclGetPeerDevicePointer", "outPtr"));
    BRAID_ASSIGN_OR_RETURN(WindowView v, lookupWindow(window, "window"));
    if (peer < 0 || peer >= v.nRanks) {
      return invalidArgument("peer=%d is not a rank of the window's communicator (0..%d)", peer, v.nRanks - 1);
    }
    // Null for a rank outside the LSA team, or inside it but out of reach (private memory): what the device's
    // ncclGetPeerPointer gives, as NCCL's host query promises.
    const int lsaRank = rankIn(v.lsa, ncclTeam{v.nRanks, v.worldRank, 1}, peer);
    if (lsaRank < 0 ||
        (v.lsaBases[static_cast<size_t>(lsaRank)] == nullptr && offset < v.lsaBytes[static_cast<size_t>(lsaRank)])) {
      *outPtr = nullptr;
      return Status::ok();
    }
    BRAID_ASSIGN_OR_RETURN(*outPtr, lsaPointer(v, offset, lsaRank, "rank", peer));
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset, void** outPtr) {
  return apiCall("ncclGetLsaMultimemDevicePointer", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(outPtr, "ncclGetLsaMultimemDevicePointer", "outPtr"));
    BRAID_ASSIGN_OR_RETURN(WindowView v, lookupWindow(window, "window"));
    BRAID_ASSIGN_OR_RETURN(*outPtr, multimemPointer(v, offset));
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
          void** outPtr) {
  return apiCall("ncclGetMultimemDevicePointer", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(outPtr, "ncclGetMultimemDevicePointer", "outPtr"));
    if (multimem.mcBasePtr == nullptr) {
      return invalidArgument(
          "multimem.mcBasePtr is NULL: pass the handle ncclDevCommCreate wrote for a device communicator made with "
          "lsaMultimem");
    }
    BRAID_ASSIGN_OR_RETURN(WindowView v, lookupWindow(window, "window"));
    BRAID_ASSIGN_OR_RETURN(*outPtr, multimemPointer(v, offset));
    return Status::ok();
  });
}

namespace {
constexpr const char* kNoCft =
    "braid has no Compute Fabric Transport (NCCL 2.31's CUDA logical endpoints on Blackwell); reach peers through "
    "LSA pointers (ncclGetPeerDevicePointer) or multicast (ncclGetLsaMultimemDevicePointer)";

Status leInfoCall(const char* fn, ncclWindow_t window, const ncclCftLeId* leId, const size_t* leOffset) {
  BRAID_RETURN_IF_ERROR(checkNotNull(leId, fn, "leId"));
  BRAID_RETURN_IF_ERROR(checkNotNull(leOffset, fn, "leOffset"));
  BRAID_RETURN_IF_ERROR(lookupWindow(window, "window").status());
  return notSupported(fn, kNoCft);
}

ncclTeam refuseCftTeam(const char* fn, ncclComm_t comm) {
  return teamCall(fn, comm, ncclTeam{0, 0, 0}, [&](const Communicator&) {
    BRAID_WARN("%s: %s", fn, kNoCft);
    return ncclTeam{0, 0, 0};
  });
}
}  // namespace

BRAID_API(ncclResult_t, ncclGetMultimemDeviceLeInfo, ncclWindow_t window, size_t offset, ncclCftLeId* leId,
          size_t* leOffset) {
  (void)offset;
  return apiCall("ncclGetMultimemDeviceLeInfo",
                 [&] { return leInfoCall("ncclGetMultimemDeviceLeInfo", window, leId, leOffset); });
}

BRAID_API(ncclResult_t, ncclGetCftDeviceLeInfo, ncclWindow_t window, size_t offset, int peerCft, ncclTeam_t cftTeam,
          ncclCftLeId* leId, size_t* leOffset) {
  (void)offset;
  (void)peerCft;
  (void)cftTeam;
  return apiCall("ncclGetCftDeviceLeInfo",
                 [&] { return leInfoCall("ncclGetCftDeviceLeInfo", window, leId, leOffset); });
}

BRAID_API(ncclResult_t, ncclGetPeerDeviceLeInfo, ncclWindow_t window, size_t offset, int peerWorld, ncclCftLeId* leId,
          size_t* leOffset) {
  (void)offset;
  (void)peerWorld;
  return apiCall("ncclGetPeerDeviceLeInfo",
                 [&] { return leInfoCall("ncclGetPeerDeviceLeInfo", window, leId, leOffset); });
}

BRAID_API(ncclTeam_t, ncclTeamCft, ncclComm_t comm, ncclCftTeamMode_t mode) {
  (void)mode;
  return refuseCftTeam("ncclTeamCft", comm);
}

BRAID_API(ncclTeam_t, ncclTeamCftMultimem, ncclComm_t comm) {
  return refuseCftTeam("ncclTeamCftMultimem", comm);
}

BRAID_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm) {
  return teamCall("ncclTeamWorld", comm, ncclTeam{0, 0, 0}, [](const Communicator& c) { return toNccl(worldTeam(c)); });
}

BRAID_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm) {
  return teamCall("ncclTeamLsa", comm, ncclTeam{0, 0, 0}, [](const Communicator& c) { return toNccl(lsaTeam(c)); });
}

BRAID_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm) {
  return teamCall("ncclTeamRail", comm, ncclTeam{0, 0, 0}, [](const Communicator& c) { return toNccl(railTeam(c)); });
}

BRAID_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank) {
  return teamCall("ncclTeamRankToWorld", comm, -1,
                  [&](const Communicator& c) { return rankIn(worldTeam(c), team, rank); });
}

BRAID_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank) {
  return teamCall("ncclTeamRankToLsa", comm, -1, [&](const Communicator& c) { return rankIn(lsaTeam(c), team, rank); });
}

BRAID_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
          ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  return apiCall("ncclLsaBarrierCreateRequirement", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(outHandle, "ncclLsaBarrierCreateRequirement", "outHandle"));
    BRAID_RETURN_IF_ERROR(checkNotNull(outReq, "ncclLsaBarrierCreateRequirement", "outReq"));
    if (nBarriers < 1) return invalidArgument("nBarriers %d: at least 1", nBarriers);
    if (team.nRanks < 1) return invalidArgument("team.nRanks %d: at least 1", team.nRanks);
    std::memset(outReq, 0, sizeof(*outReq));
    outHandle->bufHandle = 0;
    outHandle->nBarriers = nBarriers;
    outReq->bufferSize = ncclBraidLsaBarrierBytes_(nBarriers, team.nRanks);
    outReq->bufferAlign = kLsaBarrierLine;
    outReq->outBufferHandle = &outHandle->bufHandle;
    return Status::ok();
  });
}

BRAID_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  if (maxElts < 0 || maxEltSize < 1 || maxEltSize > kLlMaxEltSize) {
    BRAID_WARN("ncclLLA2ACalcSlots: maxElts %d and maxEltSize %d: need maxElts >= 0 and 1 <= maxEltSize <= %d", maxElts,
               maxEltSize, kLlMaxEltSize);
    return -1;
  }
  long long slots = static_cast<long long>(maxElts) * ((maxEltSize + 7) / 8);  // 8 data bytes per slot
  return slots > std::numeric_limits<int>::max() ? -1 : static_cast<int>(slots);
}

BRAID_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
          ncclDevResourceRequirements_t* outReq) {
  return apiCall("ncclLLA2ACreateRequirement", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(outHandle, "ncclLLA2ACreateRequirement", "outHandle"));
    BRAID_RETURN_IF_ERROR(checkNotNull(outReq, "ncclLLA2ACreateRequirement", "outReq"));
    if (nBlocks < 1) return invalidArgument("nBlocks %d: at least 1", nBlocks);
    if (nSlots < 1) return invalidArgument("nSlots %d: at least 1", nSlots);
    std::memset(outReq, 0, sizeof(*outReq));
    outHandle->bufHandle = 0;
    outHandle->nSlots = static_cast<uint32_t>(nSlots);
    // Per block: a header line (the epoch to resume at), then two halves of nSlots lines (epochs alternate).
    outReq->bufferSize = size_t(nBlocks) * (1 + 2 * size_t(nSlots)) * kA2aLineBytes;
    outReq->bufferAlign = kA2aLineBytes;
    outReq->outBufferHandle = &outHandle->bufHandle;
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team, int nBarriers,
          ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  return apiCall("ncclGinBarrierCreateRequirement", [&]() -> Status {
    BRAID_ASSIGN_OR_RETURN(auto c, lookupComm(comm, "comm"));
    BRAID_RETURN_IF_ERROR(checkNotNull(outHandle, "ncclGinBarrierCreateRequirement", "outHandle"));
    BRAID_RETURN_IF_ERROR(checkNotNull(outReq, "ncclGinBarrierCreateRequirement", "outReq"));
    (void)c;
    if (nBarriers < 1) return invalidArgument("nBarriers %d: at least 1", nBarriers);
    if (team.nRanks < 1) return invalidArgument("team.nRanks %d: at least 1", team.nRanks);
    if (int64_t(nBarriers) * team.nRanks > kMaxGinIds) {
      return invalidArgument("nBarriers %d over %d ranks need more than %lld GIN signals", nBarriers, team.nRanks,
                             static_cast<long long>(kMaxGinIds));
    }
    std::memset(outReq, 0, sizeof(*outReq));
    outHandle->signal0 = 0;
    outHandle->bufHandle = 0;
    outReq->ginSignalCount = nBarriers * team.nRanks;
    outReq->outGinSignalStart = &outHandle->signal0;
    return Status::ok();
  });
}

}  // namespace braid

// NCCL's internal name behind ncclResetDebugInit, which its library exports; programs that bound to it load.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal() {
  braid::logReinit();
}
