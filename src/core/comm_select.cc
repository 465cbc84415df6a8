// Which queued operations leave the FIFO path (the selector decides), and the direct (NVLS-style) launch phase.
// Every input to these decisions is agreed between ranks at init, so every rank chooses the same.
#include <algorithm>
#include <vector>

#include "algorithms/selector/gpu_model.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/common/sha256.h"
#include "src/common/thread_scratch.h"
#include "src/core/comm.h"
#include "src/core/profiler_plugin.h"
#include "src/core/tuner_plugin.h"

namespace braid {

Status Communicator::loadPlugins(const CommTopology& topo) {
  if (config_.internal) return Status::ok();
  observe_.profiler =
      CommProfiler::open(ProfilerCommInfo{observe_.flight->commId(), config_.commName, topo.nNodes, nranks_, rank_});
  TunerCommInfo info;
  info.commId = observe_.flight->commId();
  info.rank = rank_;
  info.nranks = nranks_;
  info.nNodes = topo.nNodes;
  std::vector<int> perNode(static_cast<size_t>(std::max(1, topo.nNodes)), 0);
  for (int node : topo.nodeOf) {
    if (node >= 0 && node < static_cast<int>(perNode.size())) ++perNode[static_cast<size_t>(node)];
  }
  info.minLocalRanks = *std::min_element(perNode.begin(), perNode.end());
  info.maxLocalRanks = *std::max_element(perNode.begin(), perNode.end());
  std::shared_ptr<TunerHook> tuner = loadTuner(params::TunerPlugin(), params::NetPlugin(), info);
  // Every rank must choose alike: the same plugin (name and ABI) on every rank, or none anywhere (a library present
  // on some hosts only, or an init() that failed on one rank, would leave ranks on different algorithms).
  struct Loaded {
    uint64_t identity;   // textHash of "name/vN"; 0: no tuner
    uint64_t constants;  // hash of the GPU-model constants it edited; 0: none edited
  };
  std::vector<Loaded> all(static_cast<size_t>(nranks_));
  const uint64_t mine = tuner ? textHash(tuner->identity()) : 0;
  std::shared_ptr<const GpuConstants> edited = tuner ? tuner->constants() : nullptr;
  all[static_cast<size_t>(rank_)].identity = mine;
  all[static_cast<size_t>(rank_)].constants =
      edited ? textHash(std::string(reinterpret_cast<const char*>(edited.get()), sizeof(GpuConstants))) | 1 : 0;
  BRAID_RETURN_IF_ERROR(bootstrap_->allGather(all.data(), sizeof(Loaded)).withContext("agreeing on the tuner plugin"));
  for (int r = 0; r < nranks_; ++r) {
    if (all[static_cast<size_t>(r)].identity == mine) continue;
    if (rank_ == 0 || tuner) {
      BRAID_WARN(
          "TUNER/Plugin: rank %d %s, rank %d another (or none): no rank uses a tuner on this communicator (install "
          "the same NCCL_TUNER_PLUGIN on every host; a plugin whose init fails on one rank is off for all)",
          rank_, tuner ? (std::string("uses ") + tuner->describe()).c_str() : "has none", r);
    }
    return Status::ok();
  }
  if (!tuner) return Status::ok();
  if (edited) {
    // Every rank must price alike: edits that differ between ranks (or exist on some only) are used by none.
    bool same = true;
    for (const Loaded& l : all) same = same && l.constants == all[static_cast<size_t>(rank_)].constants;
    if (!same) {
      BRAID_WARN(
          "TUNER/Plugin: rank %d: %s edited NCCL's GPU-model constants, differently from another rank: every "
          "rank keeps NCCL's",
          rank_, tuner->describe());
    } else if (selector_.config().deterministic) {
      BRAID_INFO(kLogInit | kLogTuning,
                 "TUNER/Plugin: rank %d: %s edited NCCL's GPU-model constants; not used: BRAID_DETERMINISTIC=1 keeps "
                 "NCCL's",
                 rank_, tuner->describe());
    } else if (!selector_.config().gpu) {
      BRAID_INFO(kLogInit | kLogTuning,
                 "TUNER/Plugin: rank %d: %s edited NCCL's GPU-model constants; this communicator is priced by braid's "
                 "host cost model, which does not use them",
                 rank_, tuner->describe());
    } else {
      GpuModelInput in = selector_.config().gpu->in;
      in.constants = edited;
      selector_.setGpuModel(std::make_shared<const GpuModel>(buildGpuModel(in)));
      BRAID_INFO(kLogInit | kLogTuning, "TUNER/Plugin: rank %d: NCCL's GPU model rebuilt from the constants %s left",
                 rank_, tuner->describe());
    }
  }
  if (selector_.config().deterministic) {
    BRAID_INFO(kLogInit | kLogTuning,
               "TUNER/Plugin: rank %d: %s is not consulted: BRAID_DETERMINISTIC=1 fixes the algorithms", rank_,
               tuner->describe());
  }
  selector_.setTuner(std::move(tuner));
  return Status::ok();
}

void Communicator::priceDirectOnGpu(int lanes, bool byModel) {
  auto m = std::make_shared<GpuModel>(*selector_.config().gpu);
  m->in.directLanes = lanes;
  m->in.directByModel = byModel;
  const DirectGpuShape shape = directShapeOf(m->in);
  const char* why = directGpuUnpriced(shape, FilterColl::kAllReduce);
  if (*why != '\0') {
    BRAID_INFO(kLogInit | kLogTuning,
               "rank %d: the NVLS-style path is taken only when NCCL_ALGO or a tuning-file pin asks: %s", rank_, why);
  } else {
    BRAID_INFO(kLogInit | kLogTuning,
               "rank %d: the NVLS-style path is priced by NCCL's symmetric-kernel model (%d lanes, peer pointers; "
               "all-reduce of 8 B %.1f us, 64 MB %.1f us) against the FIFO path (BRAID_GPU_DIRECT_AUTO=1)",
               rank_, lanes, predictDirectGpuUs(shape, FilterColl::kAllReduce, 8),
               predictDirectGpuUs(shape, FilterColl::kAllReduce, size_t{64} << 20));
  }
  selector_.setGpuModel(std::move(m));
}

namespace {
const char* profAlgo(AlgoId a) {
  static const char* const kNames[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
  const auto i = static_cast<size_t>(a);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "Unknown";
}
const char* profProto(ProtoId p) {
  static const char* const kNames[] = {"LL", "LL128", "SIMPLE"};
  const auto i = static_cast<size_t>(p);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "Unknown";
}

ProfiledOp profiledOf(const PendingOp& op) {
  ProfiledOp p;
  p.kind = op.kind;
  p.count = op.count;
  p.dtype = op.dtype;
  p.root = op.root;
  p.sendBuff = op.sendbuff;
  p.recvBuff = op.recvbuff;
  p.stream = op.stream;
  p.userTag = op.userTag;
  return p;
}
}  // namespace

void Communicator::noteChoice(const PendingOp& op, AlgoId algo, ProtoId proto) {
  observe_.flight->chose(op.flightToken, algo, proto);
  if (observe_.profiler && op.profEvent == nullptr) {
    op.profEvent = observe_.profiler->opStart(profiledOf(op), op.profApi, nChannels(), profAlgo(algo), profProto(proto),
                                              &op.profSeq);
  }
}

void Communicator::profileLaunch() {
  if (!observe_.profiler) return;
  observe_.profiler->groupLaunch();
  for (const PendingOp& op : pending_) {
    // Sends and receives have no algorithm: they start with the group.
    if (op.kind == CollKind::kSend || op.kind == CollKind::kRecv) {
      op.profEvent = observe_.profiler->opStart(profiledOf(op), op.profApi, nChannels(), nullptr, nullptr, nullptr);
    }
  }
}

void Communicator::profileStop(const PendingOp& op) {
  if (!observe_.profiler) return;
  observe_.profiler->opStop(op.profEvent);
  op.profEvent = nullptr;
}

void Communicator::profileDone() {
  if (!observe_.profiler) return;
  for (const PendingOp& op : pending_) profileStop(op);
  observe_.profiler->groupDone();
}

bool Communicator::takesDirect(const PendingOp& op) const {
  DirectCollective dc;
  return directCollOf(op.kind, &dc) && selectorFor(op).directWanted(op.kind, unitBytes(op));
}

bool Communicator::takesNvlsTree(const PendingOp& op) const {
  return op.kind == CollKind::kAllReduce && selectorFor(op).nvlsTreeWanted(op.kind, unitBytes(op));
}

bool Communicator::hasDirectWork() const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const PendingOp& op) { return takesNvlsTree(op) || takesDirect(op); });
}

DirectOp Communicator::directOpOf(const PendingOp& op, bool noted) {
  selectorFor(op).logTuning(op.kind, unitBytes(op), AlgoId::kNvls, ProtoId::kSimple);
  if (!noted) noteChoice(op, AlgoId::kNvls, ProtoId::kSimple);
  DirectOp d;
  directCollOf(op.kind, &d.req.coll);
  d.req.send = op.sendbuff;
  d.req.recv = op.recvbuff;
  d.req.count = op.count;
  d.req.op = op.op;
  d.req.lanes = op.nvlsChannels;
  if (!selectorFor(op).fifoPathAllowed(op.kind)) d.noFallback = selectorFor(op).nvlsOnlyError(op.kind);
  return d;
}

Status Communicator::launchLone() {
  struct Scratch {  // kept between calls: a warm call allocates nothing
    std::vector<Communicator*> one;
    std::vector<DirectOp> ops;
    std::vector<DirectBatch> batch;
  };
  Scratch& s = threadScratch<Scratch, Scratch>();
  s.one.assign(1, this);
  // What launch() does besides this (BRAID_CHECK_CALLS' exchange, the profiler's group, NVLSTree, several
  // communicators, streams that run on after the call) is not skipped: such a call takes launch(). So does one on a
  // communicator with a tuner plugin, which is asked again in each group (Selector::newGroup): asking here first
  // would use the last group's answer or ask it twice.
  const BackendCaps caps = backend_->caps();
  if (caps.streams || !caps.direct || pending_.size() != 1 || nranks_ < 2 || config_.checkCalls || observe_.profiler ||
      nvlsTree_ || selector_.tuner() != nullptr || !takesDirect(pending_.front())) {
    return launch(s.one, true);
  }
  // (No Selector::newGroup: without a tuner it has nothing to do. No profiler either: noting the choice is the
  // flight recorder's part only, done as the call starts.)
  const PendingOp& op = pending_.front();
  observe_.flight->startedChosen(op.flightToken, AlgoId::kNvls, ProtoId::kSimple);
  s.ops.clear();
  s.ops.push_back(directOpOf(op, /*noted=*/true));
  if (s.batch.empty()) s.batch.resize(1);
  s.batch[0].backend = backend_.get();
  s.batch[0].ops = &s.ops;
  s.batch[0].streams.assign(1, op.stream);
  Status result = backend_->launchDirect(s.batch);
  // Not run (a buffer some rank cannot reach): the FIFO path runs it, as after launchDirect.
  if (result.isOk() && !s.ops.front().ran) result = launchImpl(s.one);
  return endLaunch(s.one, std::move(result));
}

Status Communicator::launchDirect(const std::vector<Communicator*>& comms) {
  // Which queued ops each communicator runs directly. Collectives are queued in the same order on every rank, so
  // every rank picks the same ones; p2p ops (which may differ per rank) never take this path. The vectors are kept
  // per thread: the latency path allocates nothing once warm.
  struct Scratch {
    std::vector<DirectBatch> batches;
    std::vector<std::vector<DirectOp>> opsOf;
    std::vector<std::vector<size_t>> indexOf;   // the pending_ index of each direct op
    std::vector<std::vector<void*>> streamsOf;  // each batch's streams' storage, between calls
  };
  Scratch& scratch = threadScratch<Scratch, Scratch>();
  std::vector<DirectBatch>& batches = scratch.batches;
  std::vector<std::vector<DirectOp>>& opsOf = scratch.opsOf;
  std::vector<std::vector<size_t>>& indexOf = scratch.indexOf;
  std::vector<std::vector<void*>>& streamsOf = scratch.streamsOf;
  batches.clear();
  if (opsOf.size() < comms.size()) {
    opsOf.resize(comms.size());
    indexOf.resize(comms.size());
    streamsOf.resize(comms.size());
  }
  for (size_t x = 0; x < comms.size(); ++x) {
    Communicator* c = comms[x];
    opsOf[x].clear();
    indexOf[x].clear();
    if (!c->backend_->caps().direct) continue;
    for (size_t i = 0; i < c->pending_.size(); ++i) {
      const PendingOp& op = c->pending_[i];
      if (!c->takesDirect(op)) continue;
      opsOf[x].push_back(c->directOpOf(op));
      indexOf[x].push_back(i);
    }
    if (opsOf[x].empty()) continue;
    DirectBatch b{c->backend_.get(), &opsOf[x], {}};
    b.streams.swap(streamsOf[x]);
    b.streams.clear();
    for (size_t i : indexOf[x]) {
      void* s = c->pending_[i].stream;
      if (std::find(b.streams.begin(), b.streams.end(), s) == b.streams.end()) b.streams.push_back(s);
    }
    batches.push_back(std::move(b));
  }
  if (batches.empty()) return Status::ok();
  const Status launched = batches.front().backend->launchDirect(batches);
  for (size_t x = 0, k = 0; x < comms.size() && k < batches.size(); ++x) {
    if (!opsOf[x].empty()) streamsOf[x].swap(batches[k++].streams);
  }
  BRAID_RETURN_IF_ERROR(launched);
  for (size_t x = 0; x < comms.size(); ++x) {
    if (opsOf[x].empty()) continue;
    Communicator* c = comms[x];
    // The ones that ran leave the queue; the rest (buffers some rank could not reach) take the FIFO path.
    size_t kept = 0, next = 0;
    for (size_t i = 0; i < c->pending_.size(); ++i) {
      const bool isDirect = next < indexOf[x].size() && indexOf[x][next] == i;
      const bool ran = isDirect && opsOf[x][next++].ran;
      // Ran or not, the NVLS-style attempt is over: an operation that takes the FIFO path instead is reported
      // again there, with that path's choice and the same seqNumber.
      if (isDirect) c->profileStop(c->pending_[i]);
      if (ran) continue;
      c->pending_[kept++] = c->pending_[i];
    }
    c->pending_.resize(kept);
  }
  return Status::ok();
}

Status Communicator::launchAlone(const std::vector<Communicator*>& comms) {
  for (Communicator* c : comms) {
    if (c->nranks_ != 1 || !c->backend_->caps().runsAlone) continue;
    Status st;
    size_t kept = 0;
    for (size_t i = 0; i < c->pending_.size(); ++i) {
      const PendingOp& op = c->pending_[i];
      const bool reduces =
          op.kind == CollKind::kAllReduce || op.kind == CollKind::kReduce || op.kind == CollKind::kReduceScatter;
      const bool copies = op.kind == CollKind::kBroadcast || op.kind == CollKind::kAllGather;
      // Sends and receives to itself pair up on the FIFO path; after a failure nothing more runs here.
      bool ran = false;
      if ((reduces || copies) && st.isOk()) {
        // Reported as the ring (NCCL's choice for one rank too), so the flight recorder and a profiler see it.
        c->noteChoice(op, AlgoId::kRing, ProtoId::kSimple);
        const ReduceOp how = reduces ? op.op : ReduceOp{OpKind::kSum, op.dtype, 0, 1};
        st = c->backend_->runAlone(how, op.recvbuff, op.sendbuff, op.count);
        ran = st.isOk();
        if (ran) c->profileStop(op);
      }
      if (!ran && kept != i) c->pending_[kept] = std::move(c->pending_[i]);
      if (!ran) ++kept;
    }
    c->pending_.resize(kept);
    BRAID_RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

double Communicator::simulatePending() {
  double total = 0;
  for (const PendingOp& op : pending_) {
    const size_t bytes = unitBytes(op);
    const FifoChoice c = selectorFor(op).chosen(op.kind, bytes);
    const bool priced = op.kind != CollKind::kSend && op.kind != CollKind::kRecv;
    if (priced && c.predictedUs > 0) total += c.predictedUs;
    BRAID_INFO(kLogColl | kLogTuning,
               "ncclGroupSimulateEnd: comm %p rank %d: %s of %zu bytes: %s/%s on %d channel(s), %s (not run)",
               static_cast<void*>(this), rank_, collKindName(op.kind), bytes, algoName(c.algo), protoName(c.proto),
               nChannels(), priced ? strPrintf("%.2f us", c.predictedUs).c_str() : "not priced");
  }
  clearPending();
  return total;
}

}  // namespace braid
