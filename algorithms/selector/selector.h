// The algorithm selector of one communicator: for each collective and size, the FIFO path's algorithm and protocol
// (ring or tree, LL or Simple), and whether the NVLS-style (direct) path or NVLSTree takes it instead; for an
// all-to-all, pairwise or log-step. NCCL_ALGO / NCCL_PROTO restrict the choice, BRAID_TUNING_FILE pins or re-prices
// it, and the cost model decides the rest. Every input is agreed between the ranks at init, so every rank makes
// the same choice. Decisions depend only on the collective and its size and are cached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "algorithms/direct/direct.h"
#include "algorithms/selector/algo_filter.h"
#include "algorithms/selector/cost_model.h"
#include "algorithms/selector/gpu_model.h"
#include "algorithms/selector/tuner_hook.h"
#include "src/common/coll_types.h"
#include "src/common/status.h"

namespace braid {

// The FIFO path's choice (send/recv: the protocol only), with its predicted time.
struct FifoChoice {
  AlgoId algo = AlgoId::kRing;
  ProtoId proto = ProtoId::kSimple;
  double predictedUs = 0;
  int nChannels = 0;  // a tuner plugin's channel count; 0: the planner's rule
};

// The NCCL_ALGO name of a collective (false for send, receive and all-to-all).
bool filterCollOf(CollKind kind, FilterColl* out);
// The direct schedule of a collective (false when it has none; all-reduce's shot is chosen at run time).
bool directCollOf(CollKind kind, DirectCollective* out);
// Whether braid has a tree schedule for the collective.
bool treeImplemented(CollKind kind);

// What the ranks agreed on at init.
struct SelectorConfig {
  int nranks = 1;
  int nNodes = 1;
  int cpus = 1;                 // the fewest CPUs any rank's process may use
  NetShape net;                 // nNodes > 1: the network between hosts
  bool deterministic = false;   // BRAID_DETERMINISTIC
  bool hostsShareCpus = false;  // several hosts on one machine's CPUs
  size_t p2pLlThreshold = 0;    // NCCL_P2P_LL_THRESHOLD
  int alltoAllForced = -1;      // BRAID_ALLTOALL_ALGO as an AlltoAllAlgo; -1: the model
  Filter algo;                  // NCCL_ALGO
  Filter proto;                 // NCCL_PROTO
  CostModel costs;              // BRAID_TUNING_FILE, or built-in figures
  bool ll128 = false;           // the backend runs LL128 on this communicator's paths (CUDA, one host)
  bool cuda = false;            // a CUDA communicator: its NVLS-style path is priced only by `gpu` (sym_model.h)
  // A CUDA communicator whose GPUs the topology shows: NCCL's GPU tuning model prices the FIFO path's algorithms
  // and protocols instead of `costs` (null: the host cost model).
  std::shared_ptr<const GpuModel> gpu;
};

class Selector {
 public:
  Selector() = default;
  explicit Selector(SelectorConfig config) : c_(std::move(config)) {}

  // What can run besides the FIFO path, known once the backend and NVLSTree's sub-communicators exist.
  void setDirect(bool available) {
    direct_ = available;
    invalidate();
  }
  // NVLSTree's predicted time for an all-reduce of n bytes; empty when NVLSTree cannot run.
  void setNvlsTree(std::function<double(size_t)> predictUs) {
    nvlsTreeUs_ = std::move(predictUs);
    invalidate();
  }
  bool nvlsTreeAvailable() const { return static_cast<bool>(nvlsTreeUs_); }
  // A tuner plugin: asked about every collective (not send/receive or all-to-all) once per group, after the model
  // priced the pairs braid can run; the cheapest entry it leaves runs (include/nccl_tuner.h). Not consulted in
  // deterministic mode, where the algorithm is fixed.
  void setTuner(std::shared_ptr<TunerHook> tuner) {
    tuner_ = std::move(tuner);
    invalidate();
  }
  const TunerHook* tuner() const { return tuner_.get(); }
  // NCCL's GPU model rebuilt (a tuner plugin's edited constants): what CUDA communicators price pairs with.
  void setGpuModel(std::shared_ptr<const GpuModel> gpu) {
    c_.gpu = std::move(gpu);
    invalidate();
  }
  // A group starts: with a tuner, decisions are asked again (a plugin may change its answers between groups).
  void newGroup() {
    if (tuner_) ++generation_;
    for (auto& v : variants_) v.second->newGroup();
  }
  // The selector of the calls whose ncclCollConfig_t.algSelection is `text` (NCCL_ALGO's grammar): this one with
  // only the algorithms both allow (made once per text, kept while this one lives). Errors name the field and token.
  Result<const Selector*> forSelection(const std::string& text) const;

  FifoChoice chooseFifo(CollKind kind, size_t bytes) const { return decide(kind, bytes).fifo; }
  // What runs the collective, whichever path takes it (NVLS-style: kNvls; NVLSTree: kNvlsTree), with its predicted
  // time (0 for send and receive, which the model does not price).
  FifoChoice chosen(CollKind kind, size_t bytes) const;
  bool directWanted(CollKind kind, size_t bytes) const { return decide(kind, bytes).direct; }
  bool nvlsTreeWanted(CollKind kind, size_t bytes) const { return decide(kind, bytes).nvlsTree; }
  // Whether an all-to-all of `bytesPerPeer` runs the log-step (Bruck) schedule.
  bool useBruck(size_t bytesPerPeer) const;

  // Whether NCCL_ALGO / NCCL_PROTO leave an algorithm and protocol braid implements for `kind`; an error names the
  // setting and what is missing. Send/receive always pass.
  Status checkAlgorithms(CollKind kind) const;
  // Whether NCCL_ALGO leaves an algorithm on the FIFO path (ring, or tree where it exists) for `kind`.
  bool fifoPathAllowed(CollKind kind) const;
  // The error when only NVLS is allowed and some rank's buffers are not reachable by the others.
  Status nvlsOnlyError(CollKind kind) const;

  // The cost model's prediction for this communicator (across hosts: the network model).
  double predictUs(FilterColl fc, AlgoId a, ProtoId p, size_t bytes) const;
  // NCCL_DEBUG_SUBSYS=TUNING: the predicted time of every allowed algorithm and the choice.
  void logTuning(CollKind kind, size_t bytes, AlgoId chosen, ProtoId proto) const;

  // Network peers whose Simple slots cannot carry an LL chunk: LL leaves the protocol filter (an error when a
  // collective would be left without Simple).
  Status dropLlForNetwork(size_t llChunkBytes, size_t slotBytes, int rank);

  const SelectorConfig& config() const { return c_; }
  // NVLSTree's agreement at init: every rank takes the slowest network and the fewest CPUs.
  void setNet(const NetShape& net) {
    c_.net = net;
    invalidate();
  }
  void setCpus(int cpus) {
    c_.cpus = cpus;
    invalidate();
  }

 private:
  struct Decision {
    bool valid = false;
    CollKind kind = CollKind::kAllReduce;
    size_t bytes = 0;
    FifoChoice fifo;
    bool direct = false;    // NVLS; for an all-to-all entry, the log-step schedule
    bool nvlsTree = false;  // across hosts: NVLS-style inside each host, the network between
    uint64_t generation = 0;
  };
  // Which FIFO-path pairs NCCL_ALGO / NCCL_PROTO, pins and deterministic mode leave for a collective.
  struct FifoAllowed {
    bool ring = false, tree = false, ll = false, simple = false, ll128 = false;
    bool algo(AlgoId a) const { return a == AlgoId::kRing ? ring : tree; }
    bool proto(ProtoId p) const { return p == ProtoId::kLL ? ll : p == ProtoId::kLL128 ? ll128 : simple; }
  };
  FifoAllowed fifoAllowed(CollKind kind, FilterColl fc, size_t bytes) const;
  void applyTuner(FilterColl fc, Decision* d) const;
  static constexpr size_t kCacheSize = 16;
  const Decision& decide(CollKind kind, size_t bytes) const;
  FifoChoice computeFifo(CollKind kind, size_t bytes) const;
  bool computeDirect(CollKind kind, size_t bytes, const FifoChoice& fifo) const;
  bool computeNvlsTree(CollKind kind, size_t bytes, const FifoChoice& fifo) const;
  bool computeBruck(size_t bytesPerPeer) const;
  Status checkAlgorithmsNow(CollKind kind) const;  // checkAlgorithms without the memo
  void invalidate() {
    for (Decision& d : cache_) d.valid = false;
    algorithmsOk_ = 0;
  }

  SelectorConfig c_;
  bool direct_ = false;
  std::function<double(size_t)> nvlsTreeUs_;
  std::shared_ptr<TunerHook> tuner_;
  uint64_t generation_ = 0;
  mutable uint32_t warnedOff_[kFilterColls] = {};  // per collective, (algo x kProtos + proto) bits warned about
  mutable Decision cache_[kCacheSize];
  mutable uint32_t algorithmsOk_ = 0;  // bit k: checkAlgorithms passed for CollKind k (what it reads is fixed until
                                       // invalidate(): a call on the latency path costs one test)
  mutable std::map<std::string, std::shared_ptr<Selector>> variants_;  // forSelection's
};

}  // namespace braid
