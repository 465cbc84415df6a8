// NVLSTree on host memory (NCCL's NVLS + tree idea): an all-reduce over several hosts as
//   1. a reduce-scatter inside each host (NVLS-style, through the host's shared segment), so each of a host's L
//      ranks holds the host's sum of one L-th of the vector;
//   2. an all-reduce of that piece among the ranks with the same local index on every host (the network; that
//      communicator's own choice of ring or tree), so the L network connections of a host work in parallel on
//      L-th-sized pieces;
//   3. an all-gather inside each host.
// Each step is an operation on a sub-communicator made at init by splitting this one, so each is planned,
// chosen and checked like any other. Like the direct path, these all-reduces run before their communicator's FIFO
// work (Communicator::launch).
#include <algorithm>
#include <cstring>

#include "algorithms/selector/gpu_model.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/core/nvls_tree.h"

namespace braid {
namespace {

constexpr int kNvlsTreeAlgo = static_cast<int>(AlgoId::kNvlsTree);

}  // namespace

Result<std::unique_ptr<NvlsTree>> NvlsTree::create(Communicator& c) {
  std::unique_ptr<NvlsTree> none;
  if (c.topo_.nNodes < 2) return none;
  const int myHost = c.topo_.nodeOf[static_cast<size_t>(c.rank_)];
  const int perHost = c.topo_.ranksOn[0];
  const bool even = std::all_of(c.topo_.ranksOn.begin(), c.topo_.ranksOn.end(), [&](int n) { return n == perHost; });
  // Every rank decides from the same gathered data and settings (checked equal at init), so all split or none.
  const char* why = nullptr;
  if (!even) why = "hosts have different numbers of ranks";
  if (perHost < 2) why = "one rank per host (the network carries everything anyway)";
  if (params::Direct() == 0) why = "BRAID_DIRECT=0";
  if (c.links_.transport.shmDisable) why = "NCCL_SHM_DISABLE=1";
  const FilterColl ar = FilterColl::kAllReduce;
  const SelectorConfig& sc = c.selector_.config();
  const bool forced =
      !sc.algo.allows(ar, static_cast<int>(AlgoId::kRing)) && !sc.algo.allows(ar, static_cast<int>(AlgoId::kTree));
  if (!forced && !sc.costs.pinsAlgorithm(ar, kNvlsTreeAlgo) && sc.hostsShareCpus) {
    why =
        "the hosts share one machine's CPUs (BRAID_HOSTS_SHARE_CPUS), where the model cannot price it: force it "
        "with NCCL_ALGO=allreduce:nvlstree or pin it in BRAID_TUNING_FILE";
  }
  if (!sc.algo.allows(ar, kNvlsTreeAlgo)) why = "NCCL_ALGO excludes it";
  if (why != nullptr) {
    BRAID_INFO(kLogInit, "comm %p rank %d: NVLSTree off: %s", static_cast<void*>(&c), c.rank_, why);
    return none;
  }
  std::unique_ptr<NvlsTree> t(new NvlsTree());
  CommConfig inner = c.config_;
  inner.internal = true;
  BRAID_RETURN_IF_ERROR(c.split(myHost, c.rank_, inner, &t->host_).withContext("NVLSTree host communicator"));
  BRAID_RETURN_IF_ERROR(
      c.split(c.topo_.localRank, myHost, inner, &t->cross_).withContext("NVLSTree cross-host communicator"));
  // Rank i of every host takes rail i: the cross-host connections of one piece run between same-numbered devices.
  t->cross_->peers_[static_cast<size_t>(t->cross_->rank_)].rail = c.topo_.localRank;
  // The host communicator's NVLS-style group needs the ranks to share memory; if any host cannot, no rank uses it.
  int32_t ok = t->host_->backend_->caps().direct ? 1 : 0;
  std::vector<int32_t> all(static_cast<size_t>(c.nranks_));
  all[static_cast<size_t>(c.rank_)] = ok;
  BRAID_RETURN_IF_ERROR(c.bootstrap_->allGather(all.data(), sizeof(int32_t)).withContext("NVLSTree agreement"));
  if (std::find(all.begin(), all.end(), 0) != all.end()) {
    BRAID_INFO(kLogInit, "comm %p rank %d: NVLSTree off: some host's ranks cannot share memory", static_cast<void*>(&c),
               c.rank_);
    return none;
  }
  // Whether an all-reduce takes NVLSTree is decided on every rank from the sub-communicators' figures, which each
  // measured for itself (each cross-host communicator timed its own round trips): take the same worst case
  // everywhere, or ranks would choose differently and wait for each other forever.
  // On GPUs the host pieces are priced by the symmetric-kernel model from the host's own lanes, GPU generation and
  // links (sym_model.h): those are agreed too.
  struct Figures {
    double alphaUs;
    double gbps;
    int32_t cpus;
    int32_t lanes;
    int32_t minSm;
    int32_t allNvlink;
    int32_t byModel;
    int32_t pad;
  };
  NetShape crossNet = t->cross_->selector_.config().net;
  int hostCpus = t->host_->selector_.config().cpus;
  const std::shared_ptr<const GpuModel> hostGpu = t->host_->selector_.config().gpu;
  DirectGpuShape shape = hostGpu ? directShapeOf(hostGpu->in) : DirectGpuShape{};
  std::vector<Figures> figures(static_cast<size_t>(c.nranks_));
  figures[static_cast<size_t>(c.rank_)] =
      Figures{crossNet.link.alphaUs,   crossNet.link.betaGBps, hostCpus, shape.lanes, shape.minSm,
              shape.allNvlink ? 1 : 0, shape.byModel ? 1 : 0,  0};
  BRAID_RETURN_IF_ERROR(c.bootstrap_->allGather(figures.data(), sizeof(Figures)).withContext("NVLSTree figures"));
  for (const Figures& f : figures) {
    crossNet.link.alphaUs = std::max(crossNet.link.alphaUs, f.alphaUs);
    crossNet.link.betaGBps = std::min(crossNet.link.betaGBps, f.gbps);
    hostCpus = std::min(hostCpus, static_cast<int>(f.cpus));
    shape.lanes = std::min(shape.lanes, static_cast<int>(f.lanes));
    shape.minSm = std::min(shape.minSm, static_cast<int>(f.minSm));
    shape.allNvlink = shape.allNvlink && f.allNvlink != 0;
    shape.byModel = shape.byModel && f.byModel != 0;
  }
  t->cross_->selector_.setNet(crossNet);
  t->host_->selector_.setCpus(hostCpus);
  if (hostGpu) {
    auto m = std::make_shared<GpuModel>(*hostGpu);
    m->in.directLanes = shape.lanes;
    m->in.minSm = shape.minSm;
    m->in.allNvlink = shape.allNvlink;
    m->in.directByModel = shape.byModel;
    t->host_->selector_.setGpuModel(std::move(m));
  }
  // A tuner plugin's edits of NCCL's constants (the parent's model, loadPlugins) price the pieces too: internal
  // communicators load no plugin of their own.
  const std::shared_ptr<const GpuModel>& parentGpu = c.selector_.config().gpu;
  if (parentGpu && parentGpu->in.constants) {
    for (Communicator* s : {t->host_.get(), t->cross_.get()}) {
      if (!s->selector_.config().gpu) continue;
      GpuModelInput in = s->selector_.config().gpu->in;
      in.constants = parentGpu->in.constants;
      s->selector_.setGpuModel(std::make_shared<const GpuModel>(buildGpuModel(in)));
    }
  }
  BRAID_INFO(kLogInit, "comm %p rank %d: NVLSTree on: %d hosts x %d ranks (host comm %p, cross-host comm %p)",
             static_cast<void*>(&c), c.rank_, c.topo_.nNodes, perHost, static_cast<void*>(t->host_.get()),
             static_cast<void*>(t->cross_.get()));
  return t;
}

double NvlsTree::predictUs(size_t bytes) const {
  const size_t hostRanks = static_cast<size_t>(host_->nranks());
  const size_t piece = (bytes + hostRanks - 1) / hostRanks;
  const double rs = host_->selector_.predictUs(FilterColl::kReduceScatter, AlgoId::kNvls, ProtoId::kSimple, piece);
  const double ag = host_->selector_.predictUs(FilterColl::kAllGather, AlgoId::kNvls, ProtoId::kSimple, piece);
  // A host's L cross-host all-reduces share its network link: together they move the whole vector's bytes.
  const double ring = cross_->selector_.predictUs(FilterColl::kAllReduce, AlgoId::kRing, ProtoId::kSimple, bytes);
  const double tree = cross_->selector_.predictUs(FilterColl::kAllReduce, AlgoId::kTree, ProtoId::kSimple, bytes);
  const double across = ring < 0 ? tree : tree < 0 ? ring : std::min(ring, tree);
  // A piece the model does not price (-1) leaves NVLSTree unpriced: never cheaper than what is priced.
  return rs < 0 || ag < 0 || across < 0 ? -1 : rs + ag + across;
}

Status NvlsTree::run(const PendingOp& op, int nranks) {
  const size_t es = dtypeSize(op.dtype);
  const size_t hostRanks = static_cast<size_t>(host_->nranks());
  const size_t piece = (op.count + hostRanks - 1) / hostRanks;
  // A vector that does not split evenly is padded; the padding's results are dropped.
  const bool even = piece * hostRanks == op.count;
  std::vector<char> paddedIn, paddedOut;
  const void* in = op.sendbuff;
  void* out = op.recvbuff;
  if (!even) {
    paddedIn.assign(piece * hostRanks * es, 0);
    paddedOut.resize(piece * hostRanks * es);
    memcpy(paddedIn.data(), op.sendbuff, op.count * es);
    in = paddedIn.data();
    out = paddedOut.data();
  }
  std::vector<char> mine(piece * es);
  // The operator's parts: a pre-multiplier applies once, on the inputs (step 1); an average divides once, by the
  // whole communicator's rank count, at the end of the sum (step 2); max, min, prod and sum combine throughout.
  ReduceOp first = op.op, second = op.op;
  if (first.kind == OpKind::kAvg) first.kind = OpKind::kSum;
  if (second.kind == OpKind::kPreMulSum) second.kind = OpKind::kSum;
  second.nranks = nranks;
  host_->pending().push_back(PendingOp{CollKind::kReduceScatter, in, mine.data(), piece, op.dtype, first, 0});
  BRAID_RETURN_IF_ERROR(Communicator::launch({host_.get()}).withContext("NVLSTree reduce-scatter inside the host"));
  cross_->pending().push_back(PendingOp{CollKind::kAllReduce, mine.data(), mine.data(), piece, op.dtype, second, 0});
  BRAID_RETURN_IF_ERROR(Communicator::launch({cross_.get()}).withContext("NVLSTree all-reduce across hosts"));
  ReduceOp copy = op.op;  // an all-gather only copies: a plain sum's pre-op is the identity
  copy.kind = OpKind::kSum;
  host_->pending().push_back(PendingOp{CollKind::kAllGather, mine.data(), out, piece, op.dtype, copy, 0});
  BRAID_RETURN_IF_ERROR(Communicator::launch({host_.get()}).withContext("NVLSTree all-gather inside the host"));
  if (!even) memcpy(op.recvbuff, paddedOut.data(), op.count * es);
  return Status::ok();
}

Status Communicator::launchHierarchical(const std::vector<Communicator*>& comms) {
  for (Communicator* c : comms) {
    if (!c->nvlsTree_) continue;
    // Collectives are queued in the same order on every rank, so every rank takes the same ones, in order.
    std::vector<PendingOp> rest;
    for (const PendingOp& op : c->pending_) {
      if (!c->takesNvlsTree(op)) {
        rest.push_back(op);
        continue;
      }
      c->selectorFor(op).logTuning(op.kind, unitBytes(op), AlgoId::kNvlsTree, ProtoId::kSimple);
      c->noteChoice(op, AlgoId::kNvlsTree, ProtoId::kSimple);
      BRAID_RETURN_IF_ERROR(c->nvlsTree_->run(op, c->nranks_));
      c->profileStop(op);
    }
    c->pending_.swap(rest);
  }
  return Status::ok();
}

}  // namespace braid
