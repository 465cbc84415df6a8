#include "algorithms/selector/selector.h"

#include <algorithm>
#include <string>

#include "src/common/logging.h"

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

// NCCL's nBytes for a collective the selector sizes by `bytes`: the type size times the larger of the send and
// receive counts (ncclFuncMaxSendRecvCount), so all-gather and reduce-scatter count their full buffer, of which the
// selector counts one rank's part. NCCL's GPU model and tuner plugins take that size.
size_t ncclBytes(FilterColl fc, size_t bytes, int nranks) {
  const bool perRank = fc == FilterColl::kAllGather || fc == FilterColl::kReduceScatter;
  return perRank ? bytes * static_cast<size_t>(nranks > 0 ? nranks : 1) : bytes;
}

const KindInfo* kindInfo(CollKind kind) {
  for (const KindInfo& k : kKinds) {
    if (k.kind == kind) return &k;
  }
  return nullptr;  // send, receive and all-to-all
}

constexpr int kRingAlgo = static_cast<int>(AlgoId::kRing);
constexpr int kNvlsAlgo = static_cast<int>(AlgoId::kNvls);
constexpr int kTreeAlgo = static_cast<int>(AlgoId::kTree);
constexpr int kNvlsTreeAlgo = static_cast<int>(AlgoId::kNvlsTree);
constexpr int kLlProto = static_cast<int>(ProtoId::kLL);
constexpr int kLl128Proto = static_cast<int>(ProtoId::kLL128);
constexpr int kSimpleProto = static_cast<int>(ProtoId::kSimple);

}  // namespace

bool filterCollOf(CollKind kind, FilterColl* out) {
  const KindInfo* k = kindInfo(kind);
  if (k != nullptr) *out = k->filter;
  return k != nullptr;
}

bool directCollOf(CollKind kind, DirectCollective* out) {
  const KindInfo* k = kindInfo(kind);
  if (k == nullptr || !k->direct) return false;
  *out = k->directColl;
  return true;
}

bool treeImplemented(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kReduce || kind == CollKind::kBroadcast;
}

const Selector::Decision& Selector::decide(CollKind kind, size_t bytes) const {
  // Both choices depend only on the collective and its size (everything else is fixed at init), so a small
  // direct-mapped cache keeps the model off the latency path of repeated operations.
  const size_t slot = (bytes * 31 + static_cast<size_t>(kind)) % kCacheSize;
  Decision& d = cache_[slot];
  if (!d.valid || d.kind != kind || d.bytes != bytes || d.generation != generation_) {
    d.kind = kind;
    d.bytes = bytes;
    d.generation = generation_;
    d.fifo = computeFifo(kind, bytes);
    d.direct = computeDirect(kind, bytes, d.fifo);
    d.nvlsTree = computeNvlsTree(kind, bytes, d.fifo);
    FilterColl fc;
    if (tuner_ && !c_.deterministic && c_.nranks > 1 && filterCollOf(kind, &fc)) applyTuner(fc, &d);
    d.valid = true;
  }
  return d;
}

FifoChoice Selector::chosen(CollKind kind, size_t bytes) const {
  const Decision& d = decide(kind, bytes);
  FilterColl fc;
  if (d.nvlsTree && nvlsTreeUs_) return FifoChoice{AlgoId::kNvlsTree, ProtoId::kSimple, nvlsTreeUs_(bytes)};
  if (d.direct && filterCollOf(kind, &fc)) {
    return FifoChoice{AlgoId::kNvls, ProtoId::kSimple, predictUs(fc, AlgoId::kNvls, ProtoId::kSimple, bytes)};
  }
  return d.fifo;
}

double Selector::predictUs(FilterColl fc, AlgoId a, ProtoId p, size_t bytes) const {
  // On GPUs braid's NVLS-style path is not NCCL's NVLS algorithm: it is priced as NCCL prices its symmetric
  // kernels, which it resembles (sym_model.h). -1: the model disables the pair.
  if ((c_.gpu || c_.cuda) && a == AlgoId::kNvls) {
    return c_.gpu ? predictDirectGpuUs(directShapeOf(c_.gpu->in), fc, bytes) : -1;
  }
  if (c_.gpu) return predictGpuUs(*c_.gpu, fc, a, p, ncclBytes(fc, bytes, c_.nranks));
  if (c_.nNodes > 1) return c_.costs.predictAcrossHostsUs(fc, a, p, c_.nranks, c_.net, bytes);
  return c_.costs.predictUs(fc, a, p, c_.nranks, c_.cpus, bytes);
}

FifoChoice Selector::computeFifo(CollKind kind, size_t bytes) const {
  FifoChoice best;
  FilterColl fc;
  if (!filterCollOf(kind, &fc)) {
    // Send and receive: NCCL's rule, LL up to NCCL_P2P_LL_THRESHOLD bytes, within NCCL_PROTO's default entry.
    const bool llOk = c_.proto.allowsDefault(kLlProto);
    const bool simpleOk = c_.proto.allowsDefault(kSimpleProto);
    best.proto = llOk && (bytes <= c_.p2pLlThreshold || !simpleOk) ? ProtoId::kLL : ProtoId::kSimple;
    return best;
  }
  const FifoAllowed ok = fifoAllowed(kind, fc, bytes);
  best.predictedUs = -1;
  // The first pair the filters leave: the choice when the GPU model disables all of them (NCCL_ALGO/NCCL_PROTO
  // forced one it rules out), as the user asked.
  FifoChoice firstAllowed;
  bool anyAllowed = false;
  for (AlgoId a : {AlgoId::kRing, AlgoId::kTree}) {
    if (!ok.algo(a)) continue;
    for (ProtoId p : {ProtoId::kSimple, ProtoId::kLL, ProtoId::kLL128}) {  // a tie keeps Simple
      if (!ok.proto(p)) continue;
      if (!anyAllowed) firstAllowed = FifoChoice{a, p, 0};
      anyAllowed = true;
      // The host cost model has no LL128 figures: there LL128 runs only when it is all NCCL_PROTO leaves.
      const double t = p == ProtoId::kLL128 && !c_.gpu ? -1 : predictUs(fc, a, p, bytes);
      if (t < 0) continue;  // the GPU model disables the pair
      if (best.predictedUs < 0 || t < best.predictedUs) best = FifoChoice{a, p, t};
    }
  }
  if (best.predictedUs < 0 && anyAllowed) best = firstAllowed;
  return best;
}

Selector::FifoAllowed Selector::fifoAllowed(CollKind kind, FilterColl fc, size_t bytes) const {
  int pinProto = -1;
  const int pin = c_.costs.pinned(fc, bytes, &pinProto);
  const bool treeOk = treeImplemented(kind) && c_.algo.allows(fc, kTreeAlgo);
  const bool ringOk = c_.algo.allows(fc, kRingAlgo);
  bool useRing = ringOk, useTree = treeOk;
  // Deterministic mode: the ring all-reduce's order per element depends on the chunking, a tree's does not.
  if (treeOk && ((c_.deterministic && kind == CollKind::kAllReduce) || !ringOk || pin == kTreeAlgo)) {
    useRing = false;
  } else if (ringOk && (!treeOk || pin == kRingAlgo)) {
    useTree = false;
  }
  bool useLl = c_.proto.allows(fc, kLlProto), useSimple = c_.proto.allows(fc, kSimpleProto);
  bool useLl128 = c_.ll128 && c_.proto.allows(fc, kLl128Proto);
  if (pinProto == kLlProto && useLl) useSimple = useLl128 = false;
  if (pinProto == kSimpleProto && useSimple) useLl = useLl128 = false;
  if (pinProto == kLl128Proto && useLl128) useLl = useSimple = false;
  return FifoAllowed{useRing, useTree, useLl, useSimple, useLl128};
}

void Selector::applyTuner(FilterColl fc, Decision* d) const {
  // The table offers what braid can run for this collective here, priced by the model; the plugin edits it.
  CostTable table;
  bool offered[kAlgos][kProtos] = {};
  // A pair the model disables but the filters leave alone is offered as dear, never at 0 (a plugin's "forced").
  constexpr double kDisabledUs = 1e9;
  auto offer = [&](AlgoId a, ProtoId p, double us) {
    table.us[static_cast<int>(a)][static_cast<int>(p)] = static_cast<float>(us < 0 ? kDisabledUs : us);
    offered[static_cast<int>(a)][static_cast<int>(p)] = true;
  };
  const FifoAllowed ok = fifoAllowed(d->kind, fc, d->bytes);
  for (AlgoId a : {AlgoId::kRing, AlgoId::kTree}) {
    for (ProtoId p : {ProtoId::kLL, ProtoId::kLL128, ProtoId::kSimple}) {
      if (!ok.algo(a) || !ok.proto(p)) continue;
      const double t = p == ProtoId::kLL128 && !c_.gpu ? -1 : predictUs(fc, a, p, d->bytes);
      // A pair the model disables stays off, unless it is all the filters leave (the FIFO path runs it anyway).
      if (t >= 0 || (d->fifo.algo == a && d->fifo.proto == p)) offer(a, p, t);
    }
  }
  DirectCollective dc;
  // On GPUs the direct schedules are offered where the model prices them, or where they were forced.
  if (direct_ && directCollOf(d->kind, &dc) && c_.algo.allows(fc, kNvlsAlgo) && c_.proto.allows(fc, kSimpleProto)) {
    const double us = predictUs(fc, AlgoId::kNvls, ProtoId::kSimple, d->bytes);
    if (us >= 0 || d->direct) offer(AlgoId::kNvls, ProtoId::kSimple, us);
  }
  if (nvlsTreeUs_ && d->kind == CollKind::kAllReduce && c_.algo.allows(fc, kNvlsTreeAlgo) &&
      c_.proto.allows(fc, kSimpleProto)) {
    const double us = nvlsTreeUs_(d->bytes);
    if (us >= 0) offer(AlgoId::kNvlsTree, ProtoId::kSimple, us);
  }
  const CostTable before = table;
  int nChannels = 0;
  if (!tuner_->editCosts(fc, ncclBytes(fc, d->bytes, c_.nranks), &table, &nChannels)) return;
  bool changed = false;
  int bestA = -1, bestP = -1;
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      const float v = table.us[a][p];
      changed = changed || v != before.us[a][p];
      if (v < 0) continue;
      if (!offered[a][p]) {
        const uint32_t bit = 1u << (a * kProtos + p);
        if ((warnedOff_[static_cast<int>(fc)] & bit) == 0) {
          warnedOff_[static_cast<int>(fc)] |= bit;
          BRAID_WARN(
              "TUNER/Plugin: %s set %s/%s to %.1f for %s, but braid cannot run that pair on this "
              "communicator: ignored",
              tuner_->describe(), algoName(static_cast<AlgoId>(a)), protoName(static_cast<ProtoId>(p)), v,
              filterCollName(fc));
        }
        continue;
      }
      if (bestA < 0 || v < table.us[bestA][bestP]) bestA = a, bestP = p;
    }
  }
  if (nChannels > 0 && !changed) {
    d->fifo.nChannels = nChannels;
    return;
  }
  if (!changed) return;  // the model's choice stands, exactly as without a plugin
  if (bestA < 0) {
    BRAID_WARN("TUNER/Plugin: %s left no pair braid can run for %s of %zu bytes: braid's model chooses",
               tuner_->describe(), filterCollName(fc), d->bytes);
    return;
  }
  const auto a = static_cast<AlgoId>(bestA);
  const auto p = static_cast<ProtoId>(bestP);
  d->direct = a == AlgoId::kNvls;
  d->nvlsTree = a == AlgoId::kNvlsTree;
  if (a == AlgoId::kRing || a == AlgoId::kTree) d->fifo = FifoChoice{a, p, table.us[bestA][bestP], 0};
  if (nChannels > 0) d->fifo.nChannels = nChannels;
}

bool Selector::useBruck(size_t bytesPerPeer) const {
  if (c_.nranks < 2) return false;
  // Cached like the other decisions (the collective and its size decide).
  Decision& d = cache_[(bytesPerPeer * 31 + static_cast<size_t>(CollKind::kAlltoAll)) % kCacheSize];
  // With TUNING logs on, every call prices the alternatives again so each one is logged.
  if (d.valid && d.kind == CollKind::kAlltoAll && d.bytes == bytesPerPeer && !logEnabled(LogLevel::kInfo, kLogTuning)) {
    return d.direct;
  }
  d.valid = true;
  d.kind = CollKind::kAlltoAll;
  d.bytes = bytesPerPeer;
  d.direct = computeBruck(bytesPerPeer);
  return d.direct;
}

bool Selector::computeBruck(size_t bytesPerPeer) const {
  int algo = c_.alltoAllForced;
  const char* why = "BRAID_ALLTOALL_ALGO";
  if (algo < 0) {
    algo = c_.costs.pinnedAlltoAll(bytesPerPeer);
    why = "pinned";
  }
  const double pairwise = c_.costs.predictAlltoAllUs(AlltoAllAlgo::kPairwise, c_.nranks, c_.cpus, bytesPerPeer);
  const double bruck = c_.costs.predictAlltoAllUs(AlltoAllAlgo::kBruck, c_.nranks, c_.cpus, bytesPerPeer);
  if (algo < 0) {
    algo = static_cast<int>(bruck < pairwise ? AlltoAllAlgo::kBruck : AlltoAllAlgo::kPairwise);
    why = "model";
  }
  BRAID_INFO(kLogTuning, "alltoall %zu bytes per peer, %d ranks: pairwise %.1f us, bruck %.1f us -> %s (%s, costs: %s)",
             bytesPerPeer, c_.nranks, pairwise, bruck, alltoAllAlgoName(static_cast<AlltoAllAlgo>(algo)), why,
             c_.costs.source().c_str());
  return algo == static_cast<int>(AlltoAllAlgo::kBruck);
}

bool Selector::computeDirect(CollKind kind, size_t bytes, const FifoChoice& fifo) const {
  DirectCollective dc;
  FilterColl fc;
  // NVLS runs Simple only, as in NCCL.
  if (!direct_ || !directCollOf(kind, &dc) || !filterCollOf(kind, &fc) || !c_.algo.allows(fc, kNvlsAlgo) ||
      !c_.proto.allows(fc, kSimpleProto)) {
    return false;
  }
  // A pin to an algorithm that is allowed and runs on the FIFO path takes the operation there.
  const int pin = c_.costs.pinned(fc, bytes);
  const bool treeOk = treeImplemented(kind) && c_.algo.allows(fc, kTreeAlgo);
  const bool ringOk = c_.algo.allows(fc, kRingAlgo);
  if ((pin == kRingAlgo && ringOk) || (pin == kTreeAlgo && treeOk)) return false;
  if (pin == kNvlsAlgo) return true;
  if (!treeOk && !ringOk) return true;
  // On CUDA communicators: the path is priced only by the GPU model, where NCCL's rule for its symmetric kernels
  // allows (every pair of GPUs on NVLink) and BRAID_GPU_DIRECT_AUTO=1 (sym_model.h), then the cheaper of it and the
  // FIFO path's choice runs. A FIFO pair the model disables but the filters forced (priced 0) stays. Deterministic
  // mode keeps the FIFO path's fixed algorithm.
  if (c_.gpu || c_.cuda) {
    if (c_.deterministic || fifo.predictedUs <= 0) return false;
    const double us = predictUs(fc, AlgoId::kNvls, ProtoId::kSimple, bytes);
    return us >= 0 && us < fifo.predictedUs;
  }
  if (c_.deterministic) return true;
  // Otherwise the model: NVLS unless a FIFO-path choice is predicted faster.
  const double nvls = c_.costs.predictUs(fc, AlgoId::kNvls, ProtoId::kSimple, c_.nranks, c_.cpus, bytes);
  return nvls <= fifo.predictedUs;
}

bool Selector::computeNvlsTree(CollKind kind, size_t bytes, const FifoChoice& fifo) const {
  if (!nvlsTreeUs_ || kind != CollKind::kAllReduce || c_.nranks < 2) return false;
  const FilterColl fc = FilterColl::kAllReduce;
  if (!c_.algo.allows(fc, kNvlsTreeAlgo) || !c_.proto.allows(fc, kSimpleProto)) return false;
  const int pin = c_.costs.pinned(fc, bytes);
  if (pin == kNvlsTreeAlgo) return true;
  const bool ringOk = c_.algo.allows(fc, kRingAlgo);
  const bool treeOk = c_.algo.allows(fc, kTreeAlgo);
  if ((pin == kRingAlgo && ringOk) || (pin == kTreeAlgo && treeOk)) return false;
  if (!ringOk && !treeOk) return true;
  // Hosts that share one machine's CPUs: only when forced or pinned. Between network namespaces on 2 cores it
  // measured 3-8x slower than the model predicts (docs/networks.md): the model's host costs assume each host's
  // ranks have its CPUs to themselves.
  if (c_.hostsShareCpus) return false;
  const double us = nvlsTreeUs_(bytes);  // -1: not priced (NvlsTree::predictUs)
  return us >= 0 && us < fifo.predictedUs;
}

void Selector::logTuning(CollKind kind, size_t bytes, AlgoId chosen, ProtoId proto) const {
  FilterColl fc;
  if (!logEnabled(LogLevel::kInfo, kLogTuning) || !filterCollOf(kind, &fc)) return;
  std::string alternatives;
  DirectCollective dc;
  for (AlgoId a : {AlgoId::kRing, AlgoId::kTree, AlgoId::kNvls, AlgoId::kNvlsTree}) {
    const bool nvlsTree = a == AlgoId::kNvlsTree && nvlsTreeUs_ && kind == CollKind::kAllReduce;
    const bool implemented = a == AlgoId::kRing || (a == AlgoId::kTree && treeImplemented(kind)) ||
                             (a == AlgoId::kNvls && direct_ && directCollOf(kind, &dc)) || nvlsTree;
    if (!implemented || !c_.algo.allows(fc, static_cast<int>(a))) continue;
    const bool simpleOnly = a == AlgoId::kNvls || a == AlgoId::kNvlsTree;
    for (ProtoId p : {ProtoId::kLL, ProtoId::kSimple}) {
      if (!c_.proto.allows(fc, static_cast<int>(p)) || (simpleOnly && p != ProtoId::kSimple)) continue;
      alternatives += strPrintf("%s%s/%s %.1f us", alternatives.empty() ? "" : ", ", algoName(a), protoName(p),
                                nvlsTree ? nvlsTreeUs_(bytes) : predictUs(fc, a, p, bytes));
    }
  }
  const std::string tuner = tuner_ && !c_.deterministic ? std::string(", tuner plugin ") + tuner_->describe() : "";
  BRAID_INFO(kLogTuning, "%s %zu bytes, %d ranks: %s -> %s/%s (costs: %s%s%s%s)", filterCollName(fc), bytes, c_.nranks,
             alternatives.c_str(), algoName(chosen), protoName(proto),
             !c_.gpu   ? c_.costs.source().c_str()
             : direct_ ? "NCCL's GPU model, NVLS by its symmetric-kernel model (-1: disabled or not priced)"
                       : "NCCL's GPU model (-1: disabled)",
             c_.costs.pinned(fc, bytes) >= 0 ? ", pinned" : "", c_.deterministic ? ", deterministic" : "",
             tuner.c_str());
}

Result<const Selector*> Selector::forSelection(const std::string& text) const {
  auto it = variants_.find(text);
  if (it != variants_.end()) return it->second.get();
  Result<Filter> parsed = parseFilter(text, algoNames(), "config->algSelection");
  if (!parsed.isOk()) return invalidArgument("%s", parsed.status().message().c_str());  // the caller's argument
  const Filter& call = parsed.value();
  auto v = std::make_shared<Selector>(*this);
  v->variants_.clear();
  v->c_.algo = intersectFilters(
      c_.algo, call, c_.algo.setting.empty() ? "config->algSelection" : "NCCL_ALGO and config->algSelection");
  v->invalidate();
  variants_[text] = v;
  return v.get();
}

bool Selector::fifoPathAllowed(CollKind kind) const {
  FilterColl fc;
  if (!filterCollOf(kind, &fc)) return true;
  const bool proto = c_.proto.allows(fc, kLlProto) || c_.proto.allows(fc, kSimpleProto) ||
                     (c_.ll128 && c_.proto.allows(fc, kLl128Proto));
  return proto && (c_.algo.allows(fc, kRingAlgo) || (treeImplemented(kind) && c_.algo.allows(fc, kTreeAlgo)));
}

Status Selector::nvlsOnlyError(CollKind kind) const {
  FilterColl fc = FilterColl::kAllReduce;
  filterCollOf(kind, &fc);
  return invalidUsage(
      "%s=\"%s\" allows only NVLS for %s, which needs every rank's buffers reachable by every other "
      "rank: allocate them with ncclMemAlloc (or run the ranks as threads of one process)",
      c_.algo.source.c_str(), c_.algo.setting.c_str(), filterCollName(fc));
}

Status Selector::checkAlgorithms(CollKind kind) const {
  const uint32_t bit = 1u << static_cast<unsigned>(kind);
  if ((algorithmsOk_ & bit) != 0) return Status::ok();
  Status verdict = checkAlgorithmsNow(kind);
  if (verdict.isOk()) algorithmsOk_ |= bit;
  return verdict;
}

Status Selector::checkAlgorithmsNow(CollKind kind) const {
  FilterColl fc;
  // One rank moves nothing between ranks: every algorithm and protocol is the same local copy (as in NCCL).
  if (c_.nranks == 1 || !filterCollOf(kind, &fc)) return Status::ok();
  DirectCollective dc;
  const bool nvls = direct_ && directCollOf(kind, &dc);
  const bool tree = treeImplemented(kind);
  const bool nvlsTree = nvlsTreeUs_ && kind == CollKind::kAllReduce;
  const char* nvlsTreeNote =
      "; NVLSTree runs all-reduce over several hosts with the same number of ranks (at least 2) on each, sharing "
      "memory inside them";
  const char* nvlsNote = !direct_ ? "; NVLS needs every rank on one host, sharing memory" : "";
  if (!c_.algo.allows(fc, kRingAlgo) && !(nvls && c_.algo.allows(fc, kNvlsAlgo)) &&
      !(tree && c_.algo.allows(fc, kTreeAlgo)) && !(nvlsTree && c_.algo.allows(fc, kNvlsTreeAlgo))) {
    return invalidUsage(
        "%s=\"%s\" leaves no algorithm for %s on this communicator: braid implements Ring%s%s%s here (PAT "
        "and CollNet are not built yet%s%s)",
        c_.algo.source.c_str(), c_.algo.setting.c_str(), filterCollName(fc), tree ? ", Tree" : "", nvls ? ", NVLS" : "",
        nvlsTree ? ", NVLSTree" : "", nvlsNote, nvlsTree ? "" : nvlsTreeNote);
  }
  const bool fifoProto = c_.proto.allows(fc, kLlProto) || c_.proto.allows(fc, kSimpleProto) ||
                         (c_.ll128 && c_.proto.allows(fc, kLl128Proto));
  const bool fifoAlgo = c_.algo.allows(fc, kRingAlgo) || (tree && c_.algo.allows(fc, kTreeAlgo));
  const bool simple = c_.proto.allows(fc, kSimpleProto);
  const bool nvlsOk = nvls && c_.algo.allows(fc, kNvlsAlgo) && simple;
  const bool nvlsTreeOk = nvlsTree && c_.algo.allows(fc, kNvlsTreeAlgo) && simple;
  if (!(fifoProto && fifoAlgo) && !nvlsOk && !nvlsTreeOk) {
    return invalidUsage(
        "%s=\"%s\" with NCCL_PROTO=\"%s\" leaves nothing braid runs for %s: this communicator runs Ring%s "
        "with LL%s or Simple%s%s (LL128 runs on CUDA communicators of one host only; PAT and CollNet are not built "
        "yet%s%s)",
        c_.algo.source.c_str(), c_.algo.setting.c_str(), c_.proto.setting.c_str(), filterCollName(fc),
        tree ? " and Tree" : "", c_.ll128 ? ", LL128" : "", nvls ? ", and NVLS with Simple" : "",
        nvlsTree ? ", and NVLSTree with Simple" : "", nvlsNote, nvlsTree ? "" : nvlsTreeNote);
  }
  return Status::ok();
}

Status Selector::dropLlForNetwork(size_t llChunkBytes, size_t slotBytes, int rank) {
  const int ll = kLlProto, simple = kSimpleProto;
  if (!c_.proto.base[static_cast<size_t>(simple)] ||
      std::any_of(c_.proto.allowed.begin(), c_.proto.allowed.end(),
                  [&](const std::array<bool, 8>& a) { return !a[static_cast<size_t>(simple)]; })) {
    return invalidUsage(
        "NCCL_PROTO=\"%s\" leaves a collective without Simple, but this communicator has ranks on other hosts and "
        "an LL chunk (%zu bytes) does not fit a network message slot (%zu bytes): raise NCCL_BUFFSIZE or lower "
        "NCCL_LL_BUFFSIZE",
        c_.proto.setting.c_str(), llChunkBytes, slotBytes);
  }
  BRAID_INFO(kLogInit,
             "rank %d: LL off: its %zu-byte chunks do not fit %zu-byte network slots (NCCL_BUFFSIZE, "
             "NCCL_LL_BUFFSIZE)",
             rank, llChunkBytes, slotBytes);
  c_.proto.base[static_cast<size_t>(ll)] = false;
  for (std::array<bool, 8>& a : c_.proto.allowed) a[static_cast<size_t>(ll)] = false;
  invalidate();
  return Status::ok();
}

}  // namespace braid
