// The choice of algorithm for each queued collective (NCCL_ALGO, the cost model, pins) and the direct (NVLS-style)
// launch phase. Every input to these decisions is agreed between ranks at init, so every rank chooses the same.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/core/comm.h"

namespace braid {

namespace {

// What each collective is to the selector: its NCCL_ALGO name, and its direct schedule when it has one.
struct KindInfo {
  CollKind kind;
  FilterColl filter;
  bool direct;
  DirectCollective directColl;  // all-reduce: the shot is chosen at run time
};

constexpr KindInfo kKinds[] = {
    {CollKind::kAllReduce, FilterColl::kAllReduce, true, DirectCollective::kAllReduceOneShot},
    {CollKind::kBroadcast, FilterColl::kBroadcast, false, DirectCollective::kAllReduceOneShot},
    {CollKind::kReduce, FilterColl::kReduce, false, DirectCollective::kAllReduceOneShot},
    {CollKind::kAllGather, FilterColl::kAllGather, true, DirectCollective::kAllGather},
    {CollKind::kReduceScatter, FilterColl::kReduceScatter, true, DirectCollective::kReduceScatter},
};

const KindInfo* kindInfo(CollKind kind) {
  for (const KindInfo& k : kKinds) {
    if (k.kind == kind) return &k;
  }
  return nullptr;  // send and receive
}

bool filterColl(CollKind kind, FilterColl* out) {
  const KindInfo* k = kindInfo(kind);
  if (k != nullptr) *out = k->filter;
  return k != nullptr;
}

constexpr int kRingAlgo = static_cast<int>(AlgoId::kRing);
constexpr int kNvlsAlgo = static_cast<int>(AlgoId::kNvls);
constexpr int kTreeAlgo = static_cast<int>(AlgoId::kTree);
constexpr int kLlProto = static_cast<int>(ProtoId::kLL);
constexpr int kSimpleProto = static_cast<int>(ProtoId::kSimple);

// Every rank reaches this same decision from the same published buffers.
Status nvlsOnlyError(const Filter& algo, FilterColl fc) {
  return invalidUsage(
      "NCCL_ALGO=\"%s\" allows only NVLS for %s, which needs every rank's buffers reachable by every other "
      "rank: allocate them with ncclMemAlloc (or run the ranks as threads of one process)",
      algo.setting.c_str(), filterCollName(fc));
}

bool directKind(CollKind kind, DirectCollective* out);

bool treeImplemented(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kReduce || kind == CollKind::kBroadcast;
}

bool directWantedKind(CollKind kind) {
  DirectCollective dc;
  return directKind(kind, &dc);
}

bool directKind(CollKind kind, DirectCollective* out) {
  const KindInfo* k = kindInfo(kind);
  if (k == nullptr || !k->direct) return false;
  *out = k->directColl;
  return true;
}

}  // namespace

Communicator::Decision& Communicator::decisionFor(const PendingOp& op) const {
  // Both choices depend only on the collective and its size (everything else is fixed at init), so a small
  // direct-mapped cache keeps the model off the latency path of repeated operations.
  const size_t bytes = unitBytes(op);
  const size_t slot = (bytes * 31 + static_cast<size_t>(op.kind)) % kDecisionCacheSize;
  Decision& d = decisions_[slot];
  if (!d.valid || d.kind != op.kind || d.bytes != bytes) {
    d.kind = op.kind;
    d.bytes = bytes;
    d.fifo = computeFifoChoice(op);
    d.direct = computeDirectWanted(op, d.fifo);
    d.nvlsTree = computeNvlsTreeWanted(op, d.fifo);
    d.valid = true;
  }
  return d;
}

FifoChoice Communicator::chooseFifo(const PendingOp& op) const {
  return decisionFor(op).fifo;
}

bool Communicator::directWanted(const PendingOp& op) const {
  return decisionFor(op).direct;
}

double Communicator::predictUs(FilterColl fc, AlgoId a, ProtoId p, size_t bytes) const {
  if (nNodes_ > 1) return costs_.predictAcrossHostsUs(fc, a, p, nranks_, net_, bytes);
  return costs_.predictUs(fc, a, p, nranks_, cpus_, bytes);
}

FifoChoice Communicator::computeFifoChoice(const PendingOp& op) const {
  FifoChoice best;
  FilterColl fc;
  if (!filterColl(op.kind, &fc)) {
    // Send and receive: NCCL's rule, LL up to NCCL_P2P_LL_THRESHOLD bytes, within NCCL_PROTO's default entry.
    const bool llOk = protoFilter_.allowsDefault(kLlProto);
    const bool simpleOk = protoFilter_.allowsDefault(kSimpleProto);
    best.proto = llOk && (unitBytes(op) <= p2pLlThreshold_ || !simpleOk) ? ProtoId::kLL : ProtoId::kSimple;
    return best;
  }
  const size_t bytes = unitBytes(op);
  int pinProto = -1;
  const int pin = costs_.pinned(fc, bytes, &pinProto);
  const bool treeOk = treeImplemented(op.kind) && algoFilter_.allows(fc, kTreeAlgo);
  const bool ringOk = algoFilter_.allows(fc, kRingAlgo);
  bool useRing = ringOk, useTree = treeOk;
  // Deterministic mode: the ring all-reduce's order per element depends on the chunking, a tree's does not.
  if (treeOk && ((deterministic_ && op.kind == CollKind::kAllReduce) || !ringOk || pin == kTreeAlgo)) {
    useRing = false;
  } else if (ringOk && (!treeOk || pin == kRingAlgo)) {
    useTree = false;
  }
  bool useLl = protoFilter_.allows(fc, kLlProto), useSimple = protoFilter_.allows(fc, kSimpleProto);
  if (pinProto == kLlProto && useLl) useSimple = false;
  if (pinProto == kSimpleProto && useSimple) useLl = false;
  best.predictedUs = -1;
  for (AlgoId a : {AlgoId::kRing, AlgoId::kTree}) {
    if (!(a == AlgoId::kRing ? useRing : useTree)) continue;
    for (ProtoId p : {ProtoId::kSimple, ProtoId::kLL}) {  // a tie keeps Simple
      if (!(p == ProtoId::kLL ? useLl : useSimple)) continue;
      const double t = predictUs(fc, a, p, bytes);
      if (best.predictedUs < 0 || t < best.predictedUs) best = FifoChoice{a, p, t};
    }
  }
  return best;
}

bool Communicator::useBruck(size_t bytesPerPeer) const {
  if (nranks_ < 2) return false;
  // Cached like the other decisions (the collective and its size decide).
  Decision& d = decisions_[(bytesPerPeer * 31 + static_cast<size_t>(CollKind::kAlltoAll)) % kDecisionCacheSize];
  // With TUNING logs on, every call prices the alternatives again so each one is logged.
  if (d.valid && d.kind == CollKind::kAlltoAll && d.bytes == bytesPerPeer && !logEnabled(LogLevel::kInfo, kLogTuning)) {
    return d.direct;
  }
  d.valid = true;
  d.kind = CollKind::kAlltoAll;
  d.bytes = bytesPerPeer;
  d.direct = computeUseBruck(bytesPerPeer);
  return d.direct;
}

bool Communicator::computeUseBruck(size_t bytesPerPeer) const {
  int algo = alltoAllForced_;
  const char* why = params::kAlltoAllAlgo.name;
  if (algo < 0) {
    algo = costs_.pinnedAlltoAll(bytesPerPeer);
    why = "pinned";
  }
  const double pairwise = costs_.predictAlltoAllUs(AlltoAllAlgo::kPairwise, nranks_, cpus_, bytesPerPeer);
  const double bruck = costs_.predictAlltoAllUs(AlltoAllAlgo::kBruck, nranks_, cpus_, bytesPerPeer);
  if (algo < 0) {
    algo = static_cast<int>(bruck < pairwise ? AlltoAllAlgo::kBruck : AlltoAllAlgo::kPairwise);
    why = "model";
  }
  BRAID_INFO(kLogTuning, "alltoall %zu bytes per peer, %d ranks: pairwise %.1f us, bruck %.1f us -> %s (%s, costs: %s)",
             bytesPerPeer, nranks_, pairwise, bruck, alltoAllAlgoName(static_cast<AlltoAllAlgo>(algo)), why,
             costs_.source().c_str());
  return algo == static_cast<int>(AlltoAllAlgo::kBruck);
}

bool Communicator::computeDirectWanted(const PendingOp& op, const FifoChoice& fifo) const {
  DirectCollective dc;
  FilterColl fc;
  // NVLS runs Simple only, as in NCCL.
  if (!backend_->caps().direct || !directKind(op.kind, &dc) || !filterColl(op.kind, &fc) ||
      !algoFilter_.allows(fc, kNvlsAlgo) || !protoFilter_.allows(fc, kSimpleProto)) {
    return false;
  }
  // A pin to an algorithm that is allowed and runs on the FIFO path takes the operation there.
  const int pin = costs_.pinned(fc, unitBytes(op));
  const bool treeOk = treeImplemented(op.kind) && algoFilter_.allows(fc, kTreeAlgo);
  const bool ringOk = algoFilter_.allows(fc, kRingAlgo);
  if ((pin == kRingAlgo && ringOk) || (pin == kTreeAlgo && treeOk)) return false;
  if (pin == kNvlsAlgo || deterministic_) return true;
  if (!treeOk && !ringOk) return true;
  // Otherwise the model: NVLS unless a FIFO-path choice is predicted faster.
  const double nvls = costs_.predictUs(fc, AlgoId::kNvls, ProtoId::kSimple, nranks_, cpus_, unitBytes(op));
  return nvls <= fifo.predictedUs;
}

void Communicator::logTuning(const PendingOp& op, AlgoId chosen, ProtoId proto) const {
  FilterColl fc;
  if (!logEnabled(LogLevel::kInfo, kLogTuning) || !filterColl(op.kind, &fc)) return;
  const size_t bytes = unitBytes(op);
  std::string alternatives;
  for (AlgoId a : {AlgoId::kRing, AlgoId::kTree, AlgoId::kNvls, AlgoId::kNvlsTree}) {
    const bool nvlsTree = a == AlgoId::kNvlsTree && hostComm_ != nullptr && op.kind == CollKind::kAllReduce;
    const bool implemented = a == AlgoId::kRing || (a == AlgoId::kTree && treeImplemented(op.kind)) ||
                             (a == AlgoId::kNvls && backend_->caps().direct && directWantedKind(op.kind)) || nvlsTree;
    if (!implemented || !algoFilter_.allows(fc, static_cast<int>(a))) continue;
    const bool simpleOnly = a == AlgoId::kNvls || a == AlgoId::kNvlsTree;
    for (ProtoId p : {ProtoId::kLL, ProtoId::kSimple}) {
      if (!protoFilter_.allows(fc, static_cast<int>(p)) || (simpleOnly && p != ProtoId::kSimple)) continue;
      alternatives +=
          strPrintf("%s%s/%s %.1f us", alternatives.empty() ? "" : ", ", algoNames()[static_cast<size_t>(a)].c_str(),
                    protoNames()[static_cast<size_t>(p)].c_str(),
                    nvlsTree ? predictNvlsTreeUs(bytes) : predictUs(fc, a, p, bytes));
    }
  }
  BRAID_INFO(kLogTuning, "%s %zu bytes, %d ranks: %s -> %s/%s (costs: %s%s%s)", filterCollName(fc), bytes, nranks_,
             alternatives.c_str(), algoNames()[static_cast<size_t>(chosen)].c_str(),
             protoNames()[static_cast<size_t>(proto)].c_str(), costs_.source().c_str(),
             costs_.pinned(fc, bytes) >= 0 ? ", pinned" : "", deterministic_ ? ", deterministic" : "");
}

bool Communicator::fifoPathAllowed(CollKind kind) const {
  FilterColl fc;
  if (!filterColl(kind, &fc)) return true;
  const bool proto = protoFilter_.allows(fc, kLlProto) || protoFilter_.allows(fc, kSimpleProto);
  return proto && (algoFilter_.allows(fc, kRingAlgo) || (treeImplemented(kind) && algoFilter_.allows(fc, kTreeAlgo)));
}

Status Communicator::checkAlgorithms(CollKind kind) const {
  FilterColl fc;
  // One rank moves nothing between ranks: every algorithm and protocol is the same local copy (as in NCCL).
  if (nranks_ == 1 || !filterColl(kind, &fc)) return Status::ok();
  DirectCollective dc;
  const bool nvls = backend_->caps().direct && directKind(kind, &dc);
  const bool tree = treeImplemented(kind);
  const bool nvlsTree = hostComm_ != nullptr && kind == CollKind::kAllReduce;
  const int nvlsTreeAlgo = static_cast<int>(AlgoId::kNvlsTree);
  const char* nvlsTreeNote =
      "; NVLSTree runs all-reduce over several hosts with the same number of ranks (at least 2) on each, sharing "
      "memory inside them";
  if (!algoFilter_.allows(fc, kRingAlgo) && !(nvls && algoFilter_.allows(fc, kNvlsAlgo)) &&
      !(tree && algoFilter_.allows(fc, kTreeAlgo)) && !(nvlsTree && algoFilter_.allows(fc, nvlsTreeAlgo))) {
    return invalidUsage(
        "NCCL_ALGO=\"%s\" leaves no algorithm for %s on this communicator: braid implements Ring%s%s%s here (PAT "
        "and CollNet are not built yet%s%s)",
        algoFilter_.setting.c_str(), filterCollName(fc), tree ? ", Tree" : "", nvls ? ", NVLS" : "",
        nvlsTree ? ", NVLSTree" : "",
        !backend_->caps().direct ? "; NVLS needs every rank on one host, sharing memory" : "",
        nvlsTree ? "" : nvlsTreeNote);
  }
  const bool fifoProto = protoFilter_.allows(fc, kLlProto) || protoFilter_.allows(fc, kSimpleProto);
  const bool fifoAlgo = algoFilter_.allows(fc, kRingAlgo) || (tree && algoFilter_.allows(fc, kTreeAlgo));
  const bool simple = protoFilter_.allows(fc, kSimpleProto);
  const bool nvlsOk = nvls && algoFilter_.allows(fc, kNvlsAlgo) && simple;
  const bool nvlsTreeOk = nvlsTree && algoFilter_.allows(fc, nvlsTreeAlgo) && simple;
  if (!(fifoProto && fifoAlgo) && !nvlsOk && !nvlsTreeOk) {
    return invalidUsage(
        "NCCL_ALGO=\"%s\" with NCCL_PROTO=\"%s\" leaves nothing braid runs for %s: the host backend runs Ring%s "
        "with LL or Simple%s%s (LL128 is defined for the CUDA backend only; PAT and CollNet are not built yet%s%s)",
        algoFilter_.setting.c_str(), protoFilter_.setting.c_str(), filterCollName(fc), tree ? " and Tree" : "",
        nvls ? ", and NVLS with Simple" : "", nvlsTree ? ", and NVLSTree with Simple" : "",
        !backend_->caps().direct ? "; NVLS needs every rank on one host, sharing memory" : "",
        nvlsTree ? "" : nvlsTreeNote);
  }
  return Status::ok();
}

bool Communicator::takesDirect(const PendingOp& op) const {
  // directKind first: an all-to-all's cache entry holds the log-step choice in the same field.
  DirectCollective dc;
  FilterColl fc;
  return backend_->caps().direct && directKind(op.kind, &dc) && filterColl(op.kind, &fc) && directWanted(op);
}

bool Communicator::takesNvlsTree(const PendingOp& op) const {
  return hostComm_ && op.kind == CollKind::kAllReduce && decisionFor(op).nvlsTree;
}

bool Communicator::hasDirectWork() const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const PendingOp& op) { return takesNvlsTree(op) || takesDirect(op); });
}

Status Communicator::launchDirect(const std::vector<Communicator*>& comms) {
  // Which queued ops each communicator runs directly. Collectives are queued in the same order on every rank, so
  // every rank picks the same ones; p2p ops (which may differ per rank) never take this path. The vectors are kept
  // per thread: the latency path allocates nothing once warm.
  thread_local std::vector<DirectBatch> batches;
  thread_local std::vector<std::vector<DirectOp>> opsOf;
  thread_local std::vector<std::vector<size_t>> indexOf;  // the pending_ index of each direct op
  batches.clear();
  if (opsOf.size() < comms.size()) {
    opsOf.resize(comms.size());
    indexOf.resize(comms.size());
  }
  for (size_t x = 0; x < comms.size(); ++x) {
    Communicator* c = comms[x];
    opsOf[x].clear();
    indexOf[x].clear();
    if (!c->backend_->caps().direct) continue;
    for (size_t i = 0; i < c->pending_.size(); ++i) {
      const PendingOp& op = c->pending_[i];
      if (!c->takesDirect(op)) continue;
      c->logTuning(op, AlgoId::kNvls, ProtoId::kSimple);
      DirectOp d;
      directKind(op.kind, &d.req.coll);
      d.req.send = op.sendbuff;
      d.req.recv = op.recvbuff;
      d.req.count = op.count;
      d.req.op = op.op;
      FilterColl fc;
      if (filterColl(op.kind, &fc) && !c->fifoPathAllowed(op.kind)) d.noFallback = nvlsOnlyError(c->algoFilter_, fc);
      opsOf[x].push_back(d);
      indexOf[x].push_back(i);
    }
    if (!opsOf[x].empty()) batches.push_back(DirectBatch{c->backend_.get(), &opsOf[x]});
  }
  if (batches.empty()) return Status::ok();
  BRAID_RETURN_IF_ERROR(batches.front().backend->launchDirect(batches));
  for (size_t x = 0; x < comms.size(); ++x) {
    if (opsOf[x].empty()) continue;
    Communicator* c = comms[x];
    // The ones that ran leave the queue; the rest (buffers some rank could not reach) take the FIFO path.
    size_t kept = 0, next = 0;
    for (size_t i = 0; i < c->pending_.size(); ++i) {
      const bool isDirect = next < indexOf[x].size() && indexOf[x][next] == i;
      if (isDirect && opsOf[x][next++].ran) continue;
      c->pending_[kept++] = c->pending_[i];
    }
    c->pending_.resize(kept);
  }
  return Status::ok();
}

}  // namespace braid
