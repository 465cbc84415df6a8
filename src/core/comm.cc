#include "src/core/comm.h"

#include "src/core/profiler_plugin.h"

#include "algorithms/alltoall/bruck.h"
#include "algorithms/tree/tree.h"
#include "src/core/comm_topo.h"
#include "src/core/dev_comms.h"
#include "src/core/nvls_tree.h"
#include "src/core/rma.h"
#include "src/core/windows.h"
#include "topology/topo.h"

#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>
#include <unordered_map>

#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/core/call_check.h"

namespace braid {
namespace {

constexpr int64_t kMaxFlightEntries = int64_t{1} << 24;

constexpr uint32_t kTagConnect = 0x10000;
constexpr uint32_t kTagCallCount = 0x20000;  // BRAID_CHECK_CALLS: how many collectives, then their descriptions
constexpr uint32_t kTagCalls = 0x20001;

// CPUs this process may run on (its affinity mask), at least 1.
int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}
constexpr uint32_t kTagSplit = 0x40000;  // elastic.cc's shrink has 0x40001
// What a network message costs beyond half the bootstrap's round trip: the executor driving the connection and the
// network's own work (measured on 2 cores over the Socket network: about 12 us per hop against 10 us one way).
constexpr double kNetProxyHopUs = 3;
constexpr int kMaxChannels = 64;
constexpr size_t kLane1Peers = 3;  // tree 1's parent and two children

// What every rank tells every other rank at init.
struct InitExchange {
  PeerInfo peer;
  int64_t nChannels;
  int64_t buffSize;
  int64_t llBuffSize;
  int32_t cpus;            // CPUs this rank's process may use
  int32_t channelsPinned;  // the user chose the channel count (env or config): no automatic cap
  // Settings every rank must share (each rank reads its own environment): agreed below, or init fails.
  int64_t stageBytes;
  uint64_t tuningHash;
  int32_t direct;
  int32_t cma;  // BRAID_CMA: on only when every rank sets it
  int32_t deterministic;
  uint64_t algoHash;
  uint64_t protoHash;
  uint64_t kernelHash;     // the boot id's hash (0: unknown): ranks of different hosts with one kernel share CPUs
  int32_t hostsShareCpus;  // BRAID_HOSTS_SHARE_CPUS
  int32_t checkCalls;      // BRAID_CHECK_CALLS: on for all when any rank sets it
  int32_t backend;         // BackendKind: every rank must have the same
  uint64_t gpuPciId;       // the backend's GPU (0: none): two ranks of one host on one GPU need an opt-in
  int32_t residentCtas;    // Backend::residentCtas
  int32_t gpuDirectAuto;   // BRAID_GPU_DIRECT_AUTO: on only when every rank sets it
  int32_t rma[3];          // numRmaCtx, numRmaSig, rmaEagerInit: every rank must have the same
};

constexpr int64_t kMaxStageBytes = int64_t{64} << 20;

// Every rank decides from the same gathered data: a rank that says 1 wins, then one that says 0, then detection
// (two ranks of different hosts on one kernel).
bool agreeHostsShareCpus(const std::vector<InitExchange>& all, const std::vector<int>& nodeOf) {
  int setting = -1;
  for (const InitExchange& e : all) setting = std::max(setting, static_cast<int>(e.hostsShareCpus));
  if (setting >= 0) return setting == 1;
  std::unordered_map<uint64_t, int> nodeOfKernel;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].kernelHash == 0) continue;
    const auto it = nodeOfKernel.emplace(all[r].kernelHash, nodeOf[r]).first;
    if (it->second != nodeOf[r]) return true;
  }
  return false;
}

int64_t clampChannels(int64_t n, int64_t lo, int64_t hi) {
  if (lo > 0) n = std::max(n, lo);
  if (hi > 0) n = std::min(n, hi);
  return std::max<int64_t>(1, std::min<int64_t>(n, kMaxChannels));
}

}  // namespace

uint64_t localHostHash() {
  return hostHash(localHostId());
}

// The recorder exists from the start (never replaced: ncclCommAbort and a non-blocking init's caller may use it while
// init runs); an out-of-range knob is reported by init.
Communicator::Communicator()
    : observe_{std::make_unique<FlightRecorder>(static_cast<size_t>(
                   std::min<int64_t>(std::max<int64_t>(0, params::FlightRecorderEntries()), kMaxFlightEntries))),
               nullptr} {
  user_.windows = std::make_unique<Windows>(this);
  user_.devComms = std::make_unique<DevComms>(this);
}

Communicator::~Communicator() {
  if (initThread.joinable()) {
    // A non-blocking init thread holds a reference; if it drops the last one, it is the thread running this.
    if (initThread.get_id() == std::this_thread::get_id()) {
      initThread.detach();
    } else {
      initThread.join();
    }
  }
  user_.devComms.reset();
  user_.windows.reset();  // while the backend that mapped them lives
  // The backend next: its workers may hold pointers into the connectors.
  backend_.reset();
}

Status Communicator::init(const UniqueIdInfo& id, int nranks, int rank, const CommConfig& config, int device) {
  Status st = initImpl(id, nranks, rank, config, device);
  // Peers waiting on this rank in the bootstrap learn why it left, and quote it, instead of naming this rank.
  if (!st.isOk() && bootstrap_ && !health_.abort.load()) bootstrap_->tellPeersFailed(st.message());
  return st;
}

Status Communicator::initImpl(const UniqueIdInfo& id, int nranks, int rank, const CommConfig& config, int device) {
  rank_ = rank;
  nranks_ = nranks;
  device_ = device;
  config_ = config;
  logSetThreadDevice(device);
  BRAID_RETURN_IF_ERROR(validateParams());
  BRAID_ASSIGN_OR_RETURN(int64_t flightEntries, getIntParam(params::kFlightRecorderEntries));
  if (flightEntries < 0 || flightEntries > kMaxFlightEntries) {
    return invalidArgument("%s=%lld: use 0 (off) to %lld operations", params::kFlightRecorderEntries.name,
                           static_cast<long long>(flightEntries), static_cast<long long>(kMaxFlightEntries));
  }
  observe_.flight->identify(FlightIdentity{id.magic, rank, nranks, config.commName});
  if (observe_.flight->enabled()) flightInstallSignal();
  BackendChoice choice = config.backend;
  choice.nvlsHostMode = config.nvlsHostMode;
  BRAID_ASSIGN_OR_RETURN(backend_, createBackend(choice));
  if (backend_->cudaDevice() >= 0) {
    device_ = backend_->cudaDevice();
    logSetThreadDevice(device_);
  }
  // The knobs every wait and every transport obeys, read here once and passed down.
  links_.transport = TransportConfig::fromParams();
  links_.transport.memory = &backend_->fifoMemory();
  wait_.abort = &health_.abort;
  wait_.timeoutSec = links_.transport.timeoutSec;
  wait_.rank = rank;
  wait_.spinCount = static_cast<int>(std::max<int64_t>(1, params::SpinCount()));
  SelectorConfig sc;
  sc.nranks = nranks;
  sc.p2pLlThreshold = static_cast<size_t>(std::max<int64_t>(0, params::P2pLlThreshold()));

  BRAID_ASSIGN_OR_RETURN(int64_t buffSize, getIntParam(params::kBuffSize));
  if (buffSize < kFifoSlots * 64) {
    return invalidArgument("NCCL_BUFFSIZE=%lld is too small: at least %d bytes are needed", (long long)buffSize,
                           kFifoSlots * 64);
  }
  BRAID_ASSIGN_OR_RETURN(int64_t llBuffSize, getIntParam(params::kLlBuffSize));
  if (llBuffSize < kFifoSlots * 64) {
    return invalidArgument("NCCL_LL_BUFFSIZE=%lld is too small: at least %d bytes are needed", (long long)llBuffSize,
                           kFifoSlots * 64);
  }
  BRAID_ASSIGN_OR_RETURN(int64_t minCh, getIntParam(params::kMinNChannels));
  BRAID_ASSIGN_OR_RETURN(int64_t maxCh, getIntParam(params::kMaxNChannels));
  BRAID_ASSIGN_OR_RETURN(int64_t cpuCh, getIntParam(params::kCpuChannels));
  if (config.minChannels > 0) minCh = std::max<int64_t>(minCh, config.minChannels);
  if (config.maxChannels > 0) maxCh = maxCh > 0 ? std::min<int64_t>(maxCh, config.maxChannels) : config.maxChannels;
  int64_t nch = clampChannels(cpuCh, minCh, maxCh);

  if (id.fromEnv && rank == 0) BRAID_RETURN_IF_ERROR(startRoot(id).withContext("starting the NCCL_COMM_ID root"));
  BRAID_ASSIGN_OR_RETURN(bootstrap_,
                         Bootstrap::create(id, rank, nranks, &health_.abort, wait_.timeoutSec, localHostHash()));

  InitExchange mine{};
  mine.peer.rank = rank;
  mine.peer.hostHash = localHostHash();
  mine.peer.pid = getpid();
  mine.peer.cudaDev = backend_->cudaDevice();
  gethostname(mine.peer.hostname, sizeof(mine.peer.hostname) - 1);
  mine.nChannels = nch;
  mine.buffSize = buffSize;
  mine.llBuffSize = llBuffSize;
  mine.cpus = usableCpus();
  BRAID_ASSIGN_OR_RETURN(sc.algo, parseFilter(params::Algo(), algoNames(), params::kAlgo.name));
  BRAID_ASSIGN_OR_RETURN(sc.proto, parseFilter(params::Proto(), protoNames(), params::kProto.name));
  BRAID_ASSIGN_OR_RETURN(int64_t stageBytes, getIntParam(params::kDirectStageBytes));
  mine.stageBytes = std::min(std::max<int64_t>(0, stageBytes), kMaxStageBytes);
  const std::string tuningFile = params::TuningFile();
  if (!tuningFile.empty()) {
    BRAID_ASSIGN_OR_RETURN(sc.costs, CostModel::load(tuningFile));
  }
  mine.tuningHash = sc.costs.contentHash();
  mine.direct = params::Direct() != 0;
  mine.cma = params::Cma() != 0;
  const std::string boot = localBootId();
  mine.kernelHash = boot.empty() ? 0 : hostHash(boot);
  BRAID_ASSIGN_OR_RETURN(int64_t shareCpus, getIntParam(params::kHostsShareCpus));
  if (shareCpus < -1 || shareCpus > 1) {
    return invalidArgument("%s=%lld: use -1 (detect), 0 or 1", params::kHostsShareCpus.name,
                           static_cast<long long>(shareCpus));
  }
  mine.hostsShareCpus = static_cast<int32_t>(shareCpus);
  mine.deterministic = params::Deterministic() != 0;
  mine.gpuDirectAuto = params::GpuDirectAuto() == 1 ? 1 : 0;
  BRAID_RETURN_IF_ERROR(resolveRmaConfig(&config_));
  mine.rma[0] = config_.numRmaCtx;
  mine.rma[1] = config_.numRmaSig;
  mine.rma[2] = config_.rmaEagerInit;
  BRAID_ASSIGN_OR_RETURN(int64_t checkCalls, getIntParam(params::kCheckCalls));
  mine.checkCalls = checkCalls != 0 ? 1 : 0;
  mine.backend = static_cast<int32_t>(backend_->kind());
  mine.gpuPciId = backend_->gpuPciId();
  mine.residentCtas = backend_->residentCtas();
  const std::string a2a = params::AlltoAllAlgo();
  if (!a2a.empty()) {
    for (AlltoAllAlgo a : {AlltoAllAlgo::kPairwise, AlltoAllAlgo::kBruck}) {
      if (strcasecmp(a2a.c_str(), alltoAllAlgoName(a)) == 0) sc.alltoAllForced = static_cast<int>(a);
    }
    if (sc.alltoAllForced < 0) {
      return invalidArgument("%s=\"%s\" is not an all-to-all schedule (pairwise or bruck)", params::kAlltoAllAlgo.name,
                             a2a.c_str());
    }
  }
  mine.algoHash = std::hash<std::string>()(sc.algo.setting + "|" + std::to_string(sc.alltoAllForced));
  mine.protoHash = std::hash<std::string>()(sc.proto.setting);
  mine.channelsPinned = lookupParam(params::kCpuChannels).isSet || lookupParam(params::kMinNChannels).isSet ||
                        lookupParam(params::kMaxNChannels).isSet || config.minChannels > 0 || config.maxChannels > 0;
  std::vector<InitExchange> all(static_cast<size_t>(nranks));
  all[static_cast<size_t>(rank)] = mine;
  BRAID_RETURN_IF_ERROR(bootstrap_->allGather(all.data(), sizeof(InitExchange)).withContext("init allgather"));
  // Every rank must build identical schedules: agree on the smallest channel count and buffer size.
  bool pinned = false;
  for (const InitExchange& e : all) {
    peers_.push_back(e.peer);
    peers_.back().gpuPciId = e.gpuPciId;
    nch = std::min(nch, e.nChannels);
    buffSize = std::min(buffSize, e.buffSize);
    llBuffSize = std::min(llBuffSize, e.llBuffSize);
    pinned = pinned || e.channelsPinned != 0;
    if (e.backend != mine.backend) {
      return invalidUsage(
          "rank %d works on %s memory and rank %d on %s memory: every rank of a communicator must use the same "
          "backend (a rank gets cuda when its thread has a current CUDA context at init, or from %s)",
          e.peer.rank, backendKindName(static_cast<BackendKind>(e.backend)), rank, backendKindName(backend_->kind()),
          params::kBackend.name);
    }
    if (mine.gpuPciId != 0 && e.gpuPciId == mine.gpuPciId && e.peer.rank != rank &&
        e.peer.hostHash == mine.peer.hostHash && params::MultiRankGpuEnable() == 0) {
      return invalidUsage(
          "ranks %d and %d use the same GPU (device %d here): set %s=1 to allow several ranks per GPU, or give each "
          "rank its own device (cudaSetDevice before ncclCommInitRank)",
          std::min(rank, e.peer.rank), std::max(rank, e.peer.rank), device_, params::kMultiRankGpuEnable.name);
    }
    if (e.tuningHash != mine.tuningHash) {
      return invalidUsage(
          "BRAID_TUNING_FILE differs between rank %d and rank %d (here \"%s\"): every rank must "
          "load the same costs, or they choose different algorithms",
          e.peer.rank, rank, params::TuningFile().c_str());
    }
    if (e.algoHash != mine.algoHash || e.protoHash != mine.protoHash) {
      return invalidUsage(
          "NCCL_ALGO/NCCL_PROTO/%s differ between rank %d and rank %d (here NCCL_ALGO=\"%s\" NCCL_PROTO=\"%s\"): set "
          "them identically on every rank",
          params::kAlltoAllAlgo.name, e.peer.rank, rank, sc.algo.setting.c_str(), sc.proto.setting.c_str());
    }
    if (!std::equal(std::begin(e.rma), std::end(e.rma), std::begin(mine.rma))) {
      return invalidUsage(
          "one-sided settings differ between rank %d (numRmaCtx %d, numRmaSig %d, rmaEagerInit %d) and rank %d "
          "(%d, %d, %d): set the config fields, or NCCL_NUM_RMA_CTX and NCCL_RMA_EAGER_INIT, alike on every rank",
          e.peer.rank, e.rma[0], e.rma[1], e.rma[2], rank, mine.rma[0], mine.rma[1], mine.rma[2]);
    }
    // The others cannot differ either without ranks choosing different paths: the most conservative wins.
    mine.stageBytes = std::min(mine.stageBytes, e.stageBytes);
    mine.direct = mine.direct && e.direct;
    mine.cma = mine.cma && e.cma;
    mine.deterministic = mine.deterministic || e.deterministic;
    mine.gpuDirectAuto = mine.gpuDirectAuto && e.gpuDirectAuto;
    mine.checkCalls = mine.checkCalls || e.checkCalls;
  }
  // The model's inputs must be the same on every rank, or ranks would choose different algorithms.
  sc.cpus = mine.cpus;
  for (const InitExchange& e : all) sc.cpus = std::min(sc.cpus, static_cast<int>(e.cpus));
  sc.deterministic = mine.deterministic != 0;
  sc.cuda = backend_->kind() == BackendKind::kCuda;
  config_.checkCalls = mine.checkCalls != 0;
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : peers_) hosts.push_back(p.hostHash);
  std::vector<std::string> gpuBus;
  for (const InitExchange& e : all) gpuBus.push_back(gpuBusId(e.gpuPciId));
  BRAID_ASSIGN_OR_RETURN(CommTopology topo, buildCommTopology(bootstrap_.get(), rank, nranks, hosts, gpuBus));
  topo_ = topo;
  // The bootstrap learnt the host's processes from the root's table (same host hash, another process).
  wait_.localPids = bootstrap_->localPids().data();
  wait_.nLocalPids = static_cast<int>(bootstrap_->localPids().size());
  const int nLocal = topo.localRanks;
  std::vector<RankResources> res(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    RankResources& rr = res[static_cast<size_t>(r)];
    const InitExchange& e = all[static_cast<size_t>(r)];
    rr.cpus = e.cpus;
    rr.ranksOnHost = topo.ranksOn[static_cast<size_t>(topo.nodeOf[static_cast<size_t>(r)])];
    rr.hostHash = e.peer.hostHash;
    rr.gpuPciId = e.gpuPciId;
    rr.residentCtas = e.residentCtas;
  }
  // CTAs that cannot all be resident could wait for each other forever: a limit even for a count the user set.
  if (const int resident = coResidentChannelCap(res); resident < nch) {
    BRAID_INFO(
        kLogInit,
        "comm %p rank %d: %d channels (not %lld): each GPU holds one resident CTA per channel of every rank on it",
        static_cast<void*>(this), rank, resident, static_cast<long long>(nch));
    nch = resident;
  }
  const std::string queues = sharedQueueWarning(res, rank, params::CudaDeviceMaxConnections());
  if (!queues.empty()) BRAID_WARN("comm %p rank %d: %s", static_cast<void*>(this), rank, queues.c_str());
  if (!pinned) {
    // The backend's cap (the CPU backend: a worker thread per channel, so CPUs per local rank), the same on every
    // rank since it comes from the same exchange.
    const int64_t cap = backend_->maxChannels(res);
    if (cap < nch) {
      BRAID_INFO(kLogInit, "comm %p rank %d: %d channels (not %lld): %d CPUs for %d local ranks (%s pins a count)",
                 static_cast<void*>(this), rank, static_cast<int>(cap), static_cast<long long>(nch), mine.cpus, nLocal,
                 params::kCpuChannels.name);
      nch = cap;
    }
  }
  // Whole 128-byte lines, so every LL and LL128 slot starts on a line (LL128 lines are 128-byte aligned).
  links_.fifo.slotBytes = static_cast<size_t>(buffSize) / kFifoSlots / 128 * 128;
  links_.fifo.llSlotBytes = static_cast<size_t>(llBuffSize) / kFifoSlots / 128 * 128;

  if (!topo.placeCpus.empty()) peers_[static_cast<size_t>(rank)].numa = topo.numaOf[static_cast<size_t>(rank)];
  peers_[static_cast<size_t>(rank)].rail = topo.localRank;
  sc.nNodes = topo.nNodes;
  sc.hostsShareCpus = agreeHostsShareCpus(all, topo.nodeOf);
  if (topo.nNodes > 1) {
    const double hostHop =
        sc.costs.predictUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, 2, sc.cpus, 0) / 2;
    BRAID_ASSIGN_OR_RETURN(
        sc.net, measureNetwork(bootstrap_.get(), rank, nranks, topo, sc.costs, hostHop, backend_->transports()));
    if (!sc.costs.hasNetFigures()) sc.net.link.alphaUs += kNetProxyHopUs;
    // And a host hop's bandwidth, from the same 2-rank model: bytes cross hosts at the slower of it and the link.
    const size_t probe = size_t{1} << 20;
    const double probeUs =
        sc.costs.predictUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, 2, sc.cpus, probe) - 2 * hostHop;
    if (probeUs > 0) sc.net.hostGBps = static_cast<double>(probe) / (probeUs * 1e3);
    BRAID_INFO(kLogInit | kLogTuning,
               "comm %p rank %d network: %d hosts, up to %d ranks on one, %.1f us per message, %.2f GB/s per link "
               "(%s)",
               static_cast<void*>(this), rank, topo.nNodes, sc.net.localRanks, sc.net.link.alphaUs,
               sc.net.link.betaGBps,
               sc.costs.hasNetFigures() ? "BRAID_TUNING_FILE net line" : "measured round trips, device speed");
  }
  if (backend_->kind() == BackendKind::kCuda) {
    sc.gpu = gpuModelFor(topo, sc.algo, sc.proto, static_cast<int>(nch), rank);
  }
  // LL128 lines travel whole only through memory both ends map; over a network they would ride in Simple slots.
  sc.ll128 = backend_->caps().proto[static_cast<int>(ProtoId::kLL128)] && !topo.netPeers;
  selector_ = Selector(std::move(sc));
  BRAID_RETURN_IF_ERROR(loadPlugins(topo));
  BRAID_RETURN_IF_ERROR(checkLlOverNetwork());
  BRAID_ASSIGN_OR_RETURN(sched_.rings, ringsForChannels(topo.search, static_cast<int>(nch), nranks));
  // On one host the trees run over channel 0's ring order, so a subtree stays on a NUMA node; across hosts,
  // NCCL's trees (commTrees).
  sched_.treeOrder = sched_.rings[0];
  sched_.treePos.assign(static_cast<size_t>(nranks), 0);
  for (int i = 0; i < nranks; ++i) sched_.treePos[static_cast<size_t>(sched_.treeOrder[static_cast<size_t>(i)])] = i;
  const std::vector<std::vector<TreeLinks>> trees = commTrees(topo, sched_.treeOrder);
  sched_.hostTrees = topo.nNodes > 1;
  for (int w = 0; w < 2; ++w) {
    const TreeLinks& l = trees[static_cast<size_t>(w)][static_cast<size_t>(rank)];
    if (l.children.size() > static_cast<size_t>(kMaxTreeChildren)) {
      return internalError("tree %d gives rank %d %zu children", w, rank, l.children.size());
    }
    sched_.myTree[w] = TreeNode{};
    sched_.myTree[w].parent = l.parent;
    for (size_t i = 0; i < l.children.size(); ++i) sched_.myTree[w].children[i] = l.children[i];
  }
  channels_.resize(static_cast<size_t>(nch));
  auto netComm = std::make_shared<NetCommState>();
  netComm->commId = id.magic;
  netComm->trafficClass = config.trafficClass;
  netComm->nranks = nranks;
  netComm->nChannels = static_cast<int>(nch);
  links_.transport.netComm = std::move(netComm);
  BackendInitContext bctx;
  bctx.rank = rank;
  bctx.nranks = nranks;
  bctx.nChannels = static_cast<int>(nch);
  bctx.peers = &peers_;
  Bootstrap* bs = bootstrap_.get();
  bctx.allGather = [bs](void* data, size_t bytes) { return bs->allGather(data, bytes); };
  bctx.wait = wait_;
  bctx.spinCountSet = lookupParam(params::kSpinCount).isSet;
  bctx.inlineBytes = static_cast<size_t>(std::max<int64_t>(0, params::InlineBytes()));
  bctx.localRanks = nLocal;
  bctx.cpus = mine.cpus;
  bctx.netPeers = topo_.netPeers;
  bctx.direct = mine.direct != 0;
  bctx.cma = mine.cma != 0;
  bctx.directStageBytes = static_cast<size_t>(mine.stageBytes);
  bctx.placeCpus = topo.placeCpus;
  // Placed only when every rank of this host is unrestricted (a launcher that bound some ranks chose for them) and
  // no other host runs on the same CPUs (network namespaces of one machine would place their ranks on the same ones).
  bool unrestricted = topo.homeCpu >= 0 && params::PlaceThreads() != 0 && !sc.hostsShareCpus;
  for (int r = 0; r < nranks && unrestricted; ++r) {
    const bool local = topo.nodeOf[static_cast<size_t>(r)] == topo.nodeOf[static_cast<size_t>(rank)];
    unrestricted = !local || all[static_cast<size_t>(r)].cpus == mine.cpus;
  }
  bctx.homeCpu = unrestricted ? topo.homeCpu : -1;
  BRAID_RETURN_IF_ERROR(backend_->init(bctx));
  if (backend_->deviceMemory() != nullptr) {
    links_.transport.device = backend_->deviceMemory();
    links_.transport.p2pPeers = p2pPeers(topo, rank, peers_, *links_.transport.device);
    BRAID_RETURN_IF_ERROR(backend_->verifyP2p(peers_, &links_.transport.p2pPeers));
    BRAID_RETURN_IF_ERROR(backend_->initDirect(peers_, links_.transport.p2pPeers));
  }
  selector_.setDirect(backend_->caps().direct);
  if (selector_.config().gpu && backend_->caps().direct)
    priceDirectOnGpu(static_cast<int>(nch), mine.gpuDirectAuto != 0);
  BRAID_ASSIGN_OR_RETURN(nvlsTree_, NvlsTree::create(*this));
  if (nvlsTree_) {
    const NvlsTree* t = nvlsTree_.get();
    selector_.setNvlsTree([t](size_t bytes) { return t->predictUs(bytes); });
  }
  // Not for braid's own communicators (NVLSTree's inherit the config), nor with one-sided operations off.
  if (config_.rmaEagerInit == 1 && !config_.internal && config_.numRmaCtx > 0) {
    BRAID_RETURN_IF_ERROR(user_.windows->ensureSignals().withContext(
        "setting up one-sided signals at init (rmaEagerInit=1 or NCCL_RMA_EAGER_INIT=1)"));
  }
  if (logEnabled(LogLevel::kInfo, kLogInit)) {
    BRAID_INFO(kLogInit, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d - %s memory, %d channels",
               static_cast<void*>(this), rank, nranks, topo.nNodes, topo.localRanks, topo.localRank,
               backend_->kind() == BackendKind::kCuda ? "device" : "host", nChannels());
    BRAID_INFO(kLogInit | kLogGraph, "comm %p rank %d %s", static_cast<void*>(this), rank, topo.summary.c_str());
    logCommChannels(sched_.rings, trees, rank);
    BRAID_INFO(kLogInit | kLogAlloc,
               "comm %p rank %d FIFO memory bound %zu bytes ((NCCL_BUFFSIZE %lld + NCCL_LL_BUFFSIZE %lld) x %d "
               "channels x (%d ranks + %d)); receive FIFOs are mapped at first use, a ring all-reduce maps %zu",
               static_cast<void*>(this), rank, fifoMemoryBound(), (long long)buffSize, (long long)llBuffSize,
               nChannels(), nranks, static_cast<int>(kLane1Peers), connectorBytes() * channels_.size());
    BRAID_INFO(kLogInit, "comm %p rank %d nranks %d cudaDev %d commId 0x%llx - Init COMPLETE", static_cast<void*>(this),
               rank, nranks, device_, static_cast<unsigned long long>(id.magic));
  }
  return Status::ok();
}

Status Communicator::checkLlOverNetwork() {
  const PeerInfo& self = peers_[static_cast<size_t>(rank_)];
  topo_.netPeers = std::any_of(peers_.begin(), peers_.end(), [&](const PeerInfo& p) {
    Result<Transport*> t = selectTransport(backend_->transports(), links_.transport, self, p);
    return t.isOk() && t.value()->isNetwork();
  });
  // A network connection carries an LL step's chunk in its Simple slot (Connector::wholeMessages), so the chunk
  // must fit there. It does unless NCCL_BUFFSIZE is set far below NCCL_LL_BUFFSIZE; then LL is dropped on every
  // rank alike (every rank of a multi-host communicator has a network peer, and the sizes are agreed).
  if (!topo_.netPeers || llPayloadCapacity(links_.fifo.llSlotBytes) <= links_.fifo.slotBytes) return Status::ok();
  return selector_.dropLlForNetwork(llPayloadCapacity(links_.fifo.llSlotBytes), links_.fifo.slotBytes, rank_);
}

size_t Communicator::fifoMemoryBound() const {
  // A rank owns its receive FIFOs, created at first use: on lane 0 of a channel at most one per peer (itself
  // included, for a send to self), whatever mix of ring, tree, rooted tree, all-to-all and send/receive traffic
  // uses it; on lane 1 only tree 1's parent and children. A ring all-reduce alone maps one per channel.
  return connectorBytes() * channels_.size() * (static_cast<size_t>(nranks_) + kLane1Peers);
}

size_t Communicator::connectorBytes() const {
  return (links_.fifo.slotBytes + links_.fifo.llSlotBytes) * kFifoSlots;
}

// ---- reduction operators -----------------------------------------------------------------------------------------

Result<ReduceOp> Communicator::resolveOp(int op, DType dtype) const {
  return user_.redOps.resolve(op, dtype, nranks_, backend_->kind() == BackendKind::kCuda);
}

Result<int> Communicator::createPreMulSum(const void* scalar, DType dtype, bool immediate) {
  return user_.redOps.createPreMulSum(scalar, dtype, immediate);
}

Status Communicator::destroyOp(int op) {
  return user_.redOps.destroy(op);
}

// ---- buffer registrations ----------------------------------------------------------------------------------------

Result<void*> Communicator::registerBuffer(const void* buff, size_t bytes) {
  BRAID_ASSIGN_OR_RETURN(const uint64_t id, backend_->bufferId(buff, bytes, "buff"));
  void* handle = user_.buffers.add(buff, bytes, id);
  BRAID_INFO(kLogInit | kLogAlloc, "comm %p rank %d: registered %zu bytes at %p (buffer id %llu) as handle %p",
             static_cast<const void*>(this), rank_, bytes, buff, static_cast<unsigned long long>(id), handle);
  backend_->registered(handle, buff, bytes);
  return handle;
}

Status Communicator::deregisterBuffer(void* handle) {
  BRAID_RETURN_IF_ERROR(user_.buffers.remove(handle));
  backend_->deregistered(handle);
  return Status::ok();
}

Status Communicator::checkRegistered(const void* p, size_t bytes, const char* what) const {
  Registration r;
  if (p == nullptr || !user_.buffers.find(p, bytes, &r) || r.bufferId == 0) {
    return Status::ok();
  }
  // Asked of the registration's own start and extent: a buffer may run over several allocations back to back (cuMem
  // mappings), and `p` may lie in another one than the first, whose id the registration holds.
  Result<uint64_t> now = backend_->bufferId(r.base, r.bytes, what);
  if (now.isOk() && now.value() == r.bufferId) return Status::ok();
  return invalidUsage(
      "%s=%p lies in a buffer registered with ncclCommRegister (handle %p, %zu bytes at %p) whose allocation was "
      "freed since%s: call ncclCommDeregister before freeing a registered buffer",
      what, p, r.handle, r.bytes, static_cast<const void*>(r.base),
      now.isOk() ? " (the memory there now is another allocation)" : "");
}

// ---- planning and execution ----------------------------------------------------------------------------------------

Status Communicator::buildPlan(Plan* plan) {
  // Collectives first, then point-to-point, as NCCL schedules a group: p2p order relative to collectives within a
  // group may differ between ranks without changing the result.
  std::vector<PlanOp> ops;
  for (int pass = 0; pass < 2; ++pass) {
    for (const PendingOp& op : pending_) {
      const bool p2p = op.kind == CollKind::kSend || op.kind == CollKind::kRecv;
      if (p2p != (pass == 1)) continue;
      PlanOp po{&op, selectorFor(op).chooseFifo(op.kind, unitBytes(op))};
      if (!p2p && op.kind != CollKind::kAlltoAll)
        selectorFor(op).logTuning(op.kind, unitBytes(op), po.choice.algo, po.choice.proto);
      if (!p2p) noteChoice(op, po.choice.algo, po.choice.proto);
      ops.push_back(po);
    }
  }
  PlanShape shape;
  shape.rank = rank_;
  shape.nranks = nranks_;
  shape.nChannels = nChannels();
  shape.fifo = links_.fifo;
  shape.sched = &sched_;
  shape.deterministic = selector_.config().deterministic;
  BRAID_RETURN_IF_ERROR(planOps(shape, ops, plan));
  // Only the links that do not exist yet are connected.
  auto missing = [&](std::vector<Link>* links, bool send) {
    links->erase(std::remove_if(links->begin(), links->end(),
                                [&](const Link& l) { return link(l.channel, l.peer, l.lane, send) != nullptr; }),
                 links->end());
  };
  missing(&plan->sendLinks, true);
  missing(&plan->recvLinks, false);
  return Status::ok();
}

Connector* Communicator::link(int channel, int peer, int lane, bool send) const {
  if (channel < 0 || static_cast<size_t>(channel) >= channels_.size()) return nullptr;
  const Channel& ch = channels_[static_cast<size_t>(channel)];
  const auto& m = send ? ch.send : ch.recv;
  const auto it = m.find({peer, lane});
  return it == m.end() ? nullptr : it->second.get();
}

// Phase 0 creates receive FIFOs and sends their descriptions; phase 1 receives descriptions and attaches. All comms
// of a group finish phase 0 before any starts phase 1, so one thread can connect several ranks of one clique.
Status Communicator::connect(const std::vector<Link>& sendNeeds, const std::vector<Link>& recvNeeds, int phase) {
  const PeerInfo& self = peers_[static_cast<size_t>(rank_)];
  // Each (channel, lane) has its own bootstrap tag, so descriptions of several links to one peer never mix.
  auto tag = [](const Link& l) { return kTagConnect + static_cast<uint32_t>(l.channel * kLanes + l.lane); };
  if (phase == 0) {
    for (const Link& l : recvNeeds) {
      const PeerInfo& peer = peers_[static_cast<size_t>(l.peer)];
      BRAID_ASSIGN_OR_RETURN(Transport * t, selectTransport(backend_->transports(), links_.transport, self, peer));
      BRAID_ASSIGN_OR_RETURN(RecvSetup setup, t->setupRecv(links_.transport, self, peer, l.channel,
                                                           links_.fifo.slotBytes, links_.fifo.llSlotBytes));
      BRAID_RETURN_IF_ERROR(bootstrap_->send(l.peer, tag(l), setup.blob, kConnectBlobBytes));
      BRAID_INFO(kLogInit | kLogShm, "Channel %02d : %d[%d] -> %d[%d] via %s%s", l.channel, l.peer, peer.cudaDev, rank_,
                 device_, t->name(), l.lane != 0 ? " (lane 1)" : "");
      channels_[static_cast<size_t>(l.channel)].recv[{l.peer, l.lane}] = std::move(setup.connector);
    }
    return Status::ok();
  }
  for (const Link& l : sendNeeds) {
    char blob[kConnectBlobBytes];
    BRAID_RETURN_IF_ERROR(bootstrap_->recv(l.peer, tag(l), blob, kConnectBlobBytes)
                              .withContext(strPrintf("connecting channel %d to rank %d", l.channel, l.peer)));
    const PeerInfo& peer = peers_[static_cast<size_t>(l.peer)];
    BRAID_ASSIGN_OR_RETURN(Transport * t, selectTransport(backend_->transports(), links_.transport, self, peer));
    BRAID_ASSIGN_OR_RETURN(auto conn, t->connectSend(links_.transport, self, peer, l.channel, blob));
    channels_[static_cast<size_t>(l.channel)].send[{l.peer, l.lane}] = std::move(conn);
  }
  return Status::ok();
}

const void* Communicator::stageCopy(const void* src, size_t bytes) {
  return backend_->stageCopy(src, bytes);
}

void Communicator::clearPending() {
  observe_.flight->dropped();
  profileDone();
  pending_.clear();
  if (backend_) backend_->releaseLaunchMemory();
}

Status Communicator::launchInOrder(const std::vector<Communicator*>& comms) {
  BRAID_RETURN_IF_ERROR(launchAlone(comms));
  BRAID_RETURN_IF_ERROR(launchHierarchical(comms));
  BRAID_RETURN_IF_ERROR(launchDirect(comms));
  bool anyLeft = false;
  for (Communicator* c : comms) anyLeft = anyLeft || !c->pending_.empty();
  return anyLeft ? launchImpl(comms) : Status::ok();
}

Status Communicator::checkCalls(const std::vector<Communicator*>& comms) {
  // Off by default: the latency path allocates nothing for it then.
  if (std::none_of(comms.begin(), comms.end(), [](const Communicator* c) { return c->config_.checkCalls; })) {
    return Status::ok();
  }
  std::vector<std::vector<CallDesc>> mine(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    Communicator* c = comms[i];
    if (!c->config_.checkCalls || c->nranks_ < 2) continue;
    mine[i] = describeCalls(c->pending_);
    const uint64_t n = mine[i].size();
    for (int p = 0; p < c->nranks_; ++p) {
      if (p == c->rank_) continue;
      BRAID_RETURN_IF_ERROR(c->bootstrap_->send(p, kTagCallCount, &n, sizeof(n)));
      if (n > 0) BRAID_RETURN_IF_ERROR(c->bootstrap_->send(p, kTagCalls, mine[i].data(), n * sizeof(CallDesc)));
    }
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    Communicator* c = comms[i];
    if (!c->config_.checkCalls || c->nranks_ < 2) continue;
    std::vector<std::vector<CallDesc>> all(static_cast<size_t>(c->nranks_));
    all[static_cast<size_t>(c->rank_)] = mine[i];
    for (int p = 0; p < c->nranks_; ++p) {
      if (p == c->rank_) continue;
      uint64_t n = 0;
      BRAID_RETURN_IF_ERROR(c->bootstrap_->recv(p, kTagCallCount, &n, sizeof(n)));
      if (n > (uint64_t{1} << 20))
        return remoteError("rank %d announced %llu collectives in one group", p, (unsigned long long)n);
      all[static_cast<size_t>(p)].resize(static_cast<size_t>(n));
      if (n > 0) {
        BRAID_RETURN_IF_ERROR(
            c->bootstrap_->recv(p, kTagCalls, all[static_cast<size_t>(p)].data(), n * sizeof(CallDesc)));
      }
    }
    BRAID_RETURN_IF_ERROR(compareCalls(all));
  }
  return Status::ok();
}

void Communicator::abort() {
  health_.abort.store(true);
  if (backend_) backend_->abortWork();
  observe_.flight->aborted();
  Result<std::string> dumped = flightDump(strPrintf("ncclCommAbort on rank %d", rank_));
  if (!dumped.isOk()) BRAID_WARN("flight recorder: %s", dumped.status().message().c_str());
}

namespace {

// After a failed group: the oldest operation still in flight on each communicator, and the dump of every
// communicator of this process (one file, so one dump however many of them failed).
void reportFailure(const std::vector<Communicator*>& comms, const Status& result) {
  Result<std::string> dumped = flightDump(strPrintf("rank %d: %s", comms.front()->rank(), result.message().c_str()));
  std::string where;
  if (!dumped.isOk()) {
    where = dumped.status().message();
  } else if (dumped.value().empty()) {
    where = strPrintf("set %s to dump the last operations of every rank, then braid-info --analyze the dumps",
                      params::kFlightRecorderFile.name);
  } else {
    where = "dump written to " + dumped.value();
  }
  for (Communicator* c : comms) {
    if (!c->flight().enabled()) continue;
    BRAID_WARN("flight recorder: comm %p rank %d: %s; %s", static_cast<void*>(c), c->rank(),
               c->flight().summary().c_str(), where.c_str());
  }
}

}  // namespace

Status Communicator::pollAsync() {
  if (!backend_ || health_.asyncError.load() != static_cast<int>(Code::kOk)) return Status::ok();
  Status st = backend_->pollAsync();
  if (!st.isOk()) {
    int expected = static_cast<int>(Code::kOk);
    if (health_.asyncError.compare_exchange_strong(expected, static_cast<int>(st.code()))) {
      BRAID_WARN("comm %p: %s", static_cast<void*>(this), st.message().c_str());
      backend_->markAborted(st.message());
    }
  }
  return st;
}

Status Communicator::pollOwned() {
  Status st = pollAsync();
  if (!st.isOk()) {
    observe_.flight->ended(st);  // what was still running failed with it
    return st;
  }
  if (backend_) observe_.flight->finishedLaunches(backend_->launchesFinished());
  return st;
}

Status Communicator::launch(const std::vector<Communicator*>& comms, bool queuedNow) {
  Status result = checkCalls(comms);
  if (!result.isOk()) {
    for (Communicator* comm : comms) {
      comm->clearPending();
      comm->health_.asyncError.store(static_cast<int>(result.code()));
    }
    return result;
  }
  for (Communicator* comm : comms) {
    comm->observe_.flight->started(queuedNow);
    comm->selector_.newGroup();
    comm->profileLaunch();
  }
  std::vector<Communicator*> directSide, fifoSide;
  if (comms.size() > 1) {
    for (Communicator* c : comms) (c->hasDirectWork() ? directSide : fifoSide).push_back(c);
  }
  if (!directSide.empty() && !fifoSide.empty()) {
    // NCCL progresses all of a group's operations at once. A direct operation waits until every peer has issued
    // it, and a peer may first wait for this group's FIFO work on another communicator (a send it receives, say),
    // so the communicators without direct work run alongside, on a thread of their own. A communicator with both
    // kinds keeps them in order: its peers issue its operations in the same group.
    Status fifoResult;
    std::thread fifo([&] { fifoResult = launchImpl(fifoSide); });
    result = launchInOrder(directSide);
    // A failed group leaves every communicator in it unusable (below): stop the other half now rather than at its
    // deadline, and its peers fail fast too.
    if (!result.isOk()) {
      for (Communicator* c : fifoSide) c->health_.abort.store(true);
    }
    fifo.join();
    if (result.isOk()) result = fifoResult;
  } else {
    result = launchInOrder(comms);
  }
  return endLaunch(comms, std::move(result));
}

Status Communicator::endLaunch(const std::vector<Communicator*>& comms, Status result) {
  for (Communicator* comm : comms) {
    if (result.isOk() && comm->backend_->caps().streams) {
      // The work runs on after the call returns: its calls end when the backend says their launch finished.
      comm->observe_.flight->launched(comm->backend_->launchesIssued());
    } else {
      comm->observe_.flight->ended(result);
    }
  }
  if (!result.isOk()) reportFailure(comms, result);
  for (Communicator* comm : comms) {
    comm->clearPending();
    // A failed operation leaves FIFOs in an unknown state: the communicator is unusable from now on.
    if (!result.isOk()) {
      comm->health_.asyncError.store(static_cast<int>(result.code()));
      comm->backend_->markAborted(result.message());
      // Every link says so too, not only those of the failed work: a peer still waiting on this rank in a ring
      // (after this rank failed in a direct collective, say) then blames the rank that caused the failure, not
      // this one, once this process has exited.
      for (Channel& ch : comm->channels_) {
        for (auto& e : ch.send) e.second->markAborted(result.message());
        for (auto& e : ch.recv) e.second->markAborted(result.message());
      }
    }
  }
  return result;
}

Status Communicator::launchImpl(const std::vector<Communicator*>& comms) {
  std::vector<Plan> plans(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) BRAID_RETURN_IF_ERROR(comms[i]->buildPlan(&plans[i]));
  for (int phase = 0; phase < 2; ++phase) {
    for (size_t i = 0; i < comms.size(); ++i) {
      BRAID_RETURN_IF_ERROR(comms[i]->connect(plans[i].sendLinks, plans[i].recvLinks, phase));
    }
  }
  std::vector<FifoLaunch> group(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    Communicator* comm = comms[i];
    group[i].backend = comm->backend_.get();
    group[i].works = &plans[i].works;
    group[i].totalBytes = plans[i].totalBytes;
    for (const PendingOp& op : comm->pending_) {
      if (std::find(group[i].streams.begin(), group[i].streams.end(), op.stream) == group[i].streams.end()) {
        group[i].streams.push_back(op.stream);
      }
    }
    group[i].link = [comm](int channel, int peer, int lane, bool send) {
      return comm->link(channel, peer, lane, send);
    };
  }
  // A streams backend's kernels: the profiler's KernelLaunch brackets the launch call, per communicator.
  std::vector<void*> launches;
  for (size_t i = 0; i < comms.size(); ++i) {
    CommProfiler* p = comms[i]->observe_.profiler.get();
    if (p != nullptr && comms[i]->backend_->caps().streams) {
      launches.push_back(p->kernelLaunch(group[i].streams.empty() ? nullptr : group[i].streams.front()));
    } else {
      launches.push_back(nullptr);
    }
  }
  const Status launched = comms.front()->backend_->launchFifo(group);
  for (size_t i = 0; i < comms.size(); ++i) {
    if (launches[i] != nullptr) comms[i]->observe_.profiler->opStop(launches[i]);
  }
  return launched;
}

// ---- split -------------------------------------------------------------------------------------------------------

Status Communicator::split(int color, int key, const CommConfig& config, std::unique_ptr<Communicator>* out) {
  struct Entry {
    int color;
    int key;
  };
  std::vector<Entry> all(static_cast<size_t>(nranks_));
  all[static_cast<size_t>(rank_)] = Entry{color, key};
  BRAID_RETURN_IF_ERROR(bootstrap_->allGather(all.data(), sizeof(Entry)).withContext("ncclCommSplit allgather"));
  out->reset();
  if (color < 0) return Status::ok();  // NCCL_SPLIT_NOCOLOR
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r) {
    if (all[static_cast<size_t>(r)].color == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key; });
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  char idBytes[kUniqueIdBytes];
  if (newRank == 0) {
    BRAID_ASSIGN_OR_RETURN(UniqueIdInfo id, createUniqueId(/*useEnv=*/false));
    encodeUniqueId(id, idBytes);
    for (size_t i = 1; i < members.size(); ++i) {
      BRAID_RETURN_IF_ERROR(bootstrap_->send(members[i], kTagSplit, idBytes, sizeof(idBytes)));
    }
  } else {
    BRAID_RETURN_IF_ERROR(bootstrap_->recv(members[0], kTagSplit, idBytes, sizeof(idBytes)));
  }
  BRAID_ASSIGN_OR_RETURN(UniqueIdInfo id, decodeUniqueId(idBytes));
  auto child = std::make_unique<Communicator>();
  CommConfig childConfig = config;
  childConfig.backend = config_.backend;  // the parent's memory, whichever thread splits
  BRAID_RETURN_IF_ERROR(child->init(id, static_cast<int>(members.size()), newRank, childConfig, device_));
  BRAID_INFO(kLogInit, "comm %p split from comm %p: color %d key %d -> rank %d of %zu", static_cast<void*>(child.get()),
             static_cast<void*>(this), color, key, newRank, members.size());
  *out = std::move(child);
  return Status::ok();
}

}  // namespace braid
