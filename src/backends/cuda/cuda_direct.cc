#include "src/backends/cuda/cuda_direct.h"

#include <unistd.h>

#include <cstring>

#include "algorithms/selector/sym_model.h"  // kGpuDirectOneShotBytes: the selector prices the same shot
#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {
namespace {

// A lane's stage region: large enough that a round's two waits are a small part of its time, small enough that
// the areas of a few lanes on 8 ranks stay a few MB.
constexpr size_t kLaneBytes = 64 << 10;

size_t align16(size_t n) {
  return (n + 15) / 16 * 16;
}

// What each rank tells the others about its area.
struct AreaInfo {
  int32_t pid;
  int32_t device;
  uint64_t hostHash;
  uint64_t addr;     // in the owner's process
  uint64_t bytes;    // as mapped
  uint64_t handoff;  // ranks of the owner's process share the mapping (areaHandoff)
  FdTicket ticket;
  FdTicket service;  // its registry's service (DirectRegistry), for ranks of other processes
  int32_t mapped;    // second round: this rank mapped every area
  int32_t pad;
};

// Ranks of one process share each other's mappings: an area is unmapped when the last of them goes, so a rank that
// destroys its communicator while a peer's kernel still reads its last stage does not pull the memory from under it.
// (An importing process's mapping keeps the memory alive the same way.)
FifoHandoff& areaHandoff() {
  static FifoHandoff h;
  return h;
}

}  // namespace

DirectCollective cudaDirectShot(size_t bytes, int nranks) {
  return bytes <= kGpuDirectOneShotBytes || nranks < 2 ? DirectCollective::kAllReduceOneShot
                                                       : DirectCollective::kAllReduceTwoShot;
}

Result<std::unique_ptr<CudaDirect>> CudaDirect::create(const CudaDeviceMemory& memory,
                                                       const std::vector<PeerInfo>& peers, int rank, int nlanes,
                                                       const std::vector<uint8_t>& p2pPeers,
                                                       const AllGatherFn& allGather, double timeoutSec,
                                                       std::string* why, int nvlsHostMode) {
  const int n = static_cast<int>(peers.size());
  const PeerInfo& self = peers[static_cast<size_t>(rank)];
  // Decided from facts every rank has (the P2P decisions are symmetric), so every rank returns here alike.
  if (n < 2) {
    *why = "one rank";
    return std::unique_ptr<CudaDirect>();
  }
  std::vector<int> localDevices;
  int otherProcessRanks = 0, sameProcessRanks = 0;
  for (int p = 0; p < n; ++p) {
    const PeerInfo& q = peers[static_cast<size_t>(p)];
    if (q.hostHash != self.hostHash) {
      *why = strPrintf("rank %d is on another host", p);
      return std::unique_ptr<CudaDirect>();
    }
    if (p != rank && (static_cast<size_t>(p) >= p2pPeers.size() || p2pPeers[static_cast<size_t>(p)] == 0)) {
      // The pair's decision is the same on both ends, but other pairs' are not known here: the all-gather below
      // makes every rank agree.
      *why = strPrintf("ranks %d and %d do not reach each other's GPU memory (P2P)", rank, p);
    }
    if (p == rank) continue;
    if (q.pid == self.pid) {
      if (q.cudaDev >= 0 && q.cudaDev != memory.device()) localDevices.push_back(q.cudaDev);
      ++sameProcessRanks;
    } else {
      ++otherProcessRanks;
    }
  }
  std::unique_ptr<CudaDirect> d(new CudaDirect());
  d->rank_ = rank;
  d->nranks_ = n;
  d->layout_.nlanes = static_cast<uint32_t>(nlanes < 1 ? 1 : nlanes);
  d->layout_.nranks = static_cast<uint32_t>(n);
  d->layout_.laneBytes = kLaneBytes;
  std::vector<AreaInfo> all(static_cast<size_t>(n));
  AreaInfo& me = all[static_cast<size_t>(rank)];
  me = AreaInfo{};
  me.pid = static_cast<int32_t>(getpid());
  me.device = memory.device();
  me.hostHash = self.hostHash;
  std::string failed = *why;
  d->registry_ = std::make_unique<DirectRegistry>(memory.api(), &memory, rank, timeoutSec);
  if (failed.empty() && otherProcessRanks > 0) {
    Result<FdTicket> t = d->registry_->startService();
    if (t.isOk()) {
      me.service = t.value();
    } else {
      failed = t.status().message();
    }
  }
  if (failed.empty()) {
    Result<DeviceFifoMem> mem = memory.alloc(d->layout_.bytes(), nullptr, 0, localDevices, otherProcessRanks > 0);
    if (mem.isOk()) {
      me.addr = reinterpret_cast<uint64_t>(mem.value().base);
      me.bytes = mem.value().bytes;
      d->areaBytes_ = mem.value().bytes;
      d->held_.push_back(mem.value().owner);
      if (sameProcessRanks > 0) me.handoff = areaHandoff().put(mem.value().owner, sameProcessRanks);
      if (mem.value().exportFd >= 0) {
        Result<FdTicket> t = offerFd(mem.value().exportFd, otherProcessRanks);
        close(mem.value().exportFd);
        if (t.isOk()) {
          d->ticket_ = t.value();
          d->offered_ = true;
          me.ticket = t.value();
        } else {
          failed = t.status().message();
        }
      }
    } else {
      failed = strPrintf("allocating its %zu-byte direct area: %s", d->layout_.bytes(), mem.status().message().c_str());
    }
  }
  me.mapped = failed.empty() ? 1 : 0;
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(AreaInfo)).withContext("exchanging the direct areas"));
  bool everyone = true;
  for (const AreaInfo& a : all) everyone = everyone && a.mapped != 0;
  d->areas_.assign(static_cast<size_t>(n), nullptr);
  for (int p = 0; p < n && everyone && failed.empty(); ++p) {
    const AreaInfo& a = all[static_cast<size_t>(p)];
    if (a.pid == me.pid) {
      if (p != rank) {
        Result<std::shared_ptr<void>> owner = areaHandoff().take(a.handoff, "direct area", p);
        if (!owner.isOk()) {
          failed = owner.status().message();
          break;
        }
        d->held_.push_back(owner.value());
      }
      d->areas_[static_cast<size_t>(p)] = reinterpret_cast<char*>(a.addr);
      continue;
    }
    Result<int> fd = fetchFd(a.ticket, timeoutSec);
    if (!fd.isOk()) {
      failed = strPrintf("fetching rank %d's direct area: %s", p, fd.status().message().c_str());
      break;
    }
    Result<DeviceFifoMem> mem = memory.import(fd.value(), a.bytes);
    close(fd.value());
    if (!mem.isOk()) {
      failed = strPrintf("mapping rank %d's direct area: %s", p, mem.status().message().c_str());
      break;
    }
    d->held_.push_back(mem.value().owner);
    d->areas_[static_cast<size_t>(p)] = mem.value().base;
  }
  // Second round: every rank says whether it mapped every area. Peers took theirs by then (or never will).
  me.mapped = everyone && failed.empty() ? 1 : 0;
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(AreaInfo)).withContext("agreeing on the direct areas"));
  if (me.handoff != 0) areaHandoff().withdraw(me.handoff);
  for (int p = 0; p < n; ++p) {
    if (all[static_cast<size_t>(p)].mapped != 0) continue;
    *why = p == rank ? failed : strPrintf("rank %d could not map every rank's direct area", p);
    if (why->empty()) *why = strPrintf("rank %d could not set up its direct area", p);
    return std::unique_ptr<CudaDirect>();
  }
  std::vector<DirectRegistry::Rank> ranks(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    const AreaInfo& a = all[static_cast<size_t>(p)];
    ranks[static_cast<size_t>(p)] = DirectRegistry::Rank{a.pid, a.device, a.service};
  }
  d->registry_->setRanks(std::move(ranks));
  std::vector<CudaMulticast::Rank> mcRanks(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p)
    mcRanks[static_cast<size_t>(p)] = {all[static_cast<size_t>(p)].pid, all[static_cast<size_t>(p)].device};
  d->mcRanks_ = mcRanks;
  std::string mcWhy;
  BRAID_ASSIGN_OR_RETURN(
      d->mc_, CudaMulticast::create(
                  memory.api(), rank, mcRanks, d->areas_[static_cast<size_t>(rank)], me.bytes, d->layout_.bytes(),
                  allGather, timeoutSec, &mcWhy, params::NvlsEnable() == 1, d->mcCount_,
                  (nvlsHostMode & kNvlsHostNoTransport) != 0 ? "ncclConfig_t.nvlsHostMode disables the NVLS transport"
                                                             : nullptr));
  d->noSymmetricMultimem_ = (nvlsHostMode & kNvlsHostNoSymmetricMultimem) != 0;
  d->mcWhy_ = mcWhy;
  if (d->mc_) {
    BRAID_INFO(kLogInit | kLogNvls,
               "rank %d: NVLS multicast on: the %d ranks' direct areas bound to one %zu-byte object", rank, n,
               d->mc_->bytes());
  } else {
    BRAID_INFO(kLogInit | kLogNvls, "rank %d: NVLS multicast off, the NVLS-style collectives use peer pointers: %s",
               rank, mcWhy.c_str());
  }
  why->clear();
  return d;
}

CudaDirect::~CudaDirect() {
  if (offered_) withdrawFd(ticket_);
}

size_t CudaDirect::imageBytes(size_t nops) const {
  const size_t n = static_cast<size_t>(nranks_);
  return align16(sizeof(DirectKernelWork)) + align16(sizeof(char*) * n) + align16(sizeof(DirectOpDesc) * nops) +
         sizeof(ReduceOp) * n * nops + sizeof(uint64_t) * n * nops;
}

bool CudaDirect::readInPlace(const DirectOpDesc& d, uint64_t* peerSend) const {
  if (d.stageOp.kind == OpKind::kPreMulSum) return false;  // the scalar is this rank's, applied as it stages
  const size_t es = dtypeSize(d.stageOp.dtype);
  const size_t n = static_cast<size_t>(nranks_);
  const size_t sendBytes = d.count * es * (d.coll == DirectCollective::kReduceScatter ? n : 1);
  const size_t recvBytes = d.count * es * (d.coll == DirectCollective::kAllGather ? n : 1);
  // One-shot all-reduce and reduce-scatter write results while peers still read the same round's inputs; where
  // the two overlap (in place) the input is staged. Two-shot writes only after every rank reduced its slice, and
  // all-gather's own block is already in place.
  const bool overlap = d.send < d.recv + recvBytes && d.recv < d.send + sendBytes;
  if (overlap && (d.coll == DirectCollective::kAllReduceOneShot || d.coll == DirectCollective::kReduceScatter)) {
    return false;
  }
  return registry_->peerAddresses(d.send, sendBytes, peerSend);
}

void CudaDirect::findSymmetric(DirectOpDesc* d) const {
  const size_t es = dtypeSize(d->stageOp.dtype);
  const size_t n = static_cast<size_t>(nranks_);
  if (d->stageOp.kind == OpKind::kPreMulSum) return;  // the switch cannot scale each rank's input
  if (noSymmetricMultimem_) return;                   // ncclConfig_t.nvlsHostMode
  if (d->coll != DirectCollective::kAllGather && mcOpFor(d->stageOp.dtype, d->stageOp.kind) == McOp::kNone) return;
  // Whole 16-byte units everywhere (blocks, rounds, slices): multicast words never reach past a buffer or block.
  const size_t block = d->count * es;
  if (block % 16 != 0 || ((reinterpret_cast<uintptr_t>(d->send) | reinterpret_cast<uintptr_t>(d->recv)) & 15) != 0) {
    return;
  }
  const size_t sendBytes = block * (d->coll == DirectCollective::kReduceScatter ? n : 1);
  const size_t recvBytes = block * (d->coll == DirectCollective::kAllGather ? n : 1);
  // What goes through the switch must be symmetric: the inputs a load-reduce reads (all-reduce, reduce-scatter),
  // the outputs a store writes (two-shot all-reduce, all-gather). An all-gather reads its input locally, a one-shot
  // all-reduce and a reduce-scatter write theirs locally.
  const bool loads = d->coll != DirectCollective::kAllGather;
  const bool stores = d->coll == DirectCollective::kAllGather || d->coll == DirectCollective::kAllReduceTwoShot;
  WindowMcTable::Hit s, r;
  if (loads && !windowMcs_->find(d->send, sendBytes, &s)) return;
  if (stores && !windowMcs_->find(d->recv, recvBytes, &r)) return;
  d->mcSend = s.mc;
  d->mcRecv = r.mc;
  // Exact names of the windows and offsets (never 0); one the collective does not use is 1 on every rank.
  d->symKey[0] = loads ? s.key : 1;
  d->symKey[1] = stores ? r.key : 1;
}

KernelArgs CudaDirect::writeImage(const std::vector<DirectOp>& ops, char* image) const {
  const size_t n = static_cast<size_t>(nranks_);
  auto* work = reinterpret_cast<DirectKernelWork*>(image);
  char* at = image + align16(sizeof(DirectKernelWork));
  auto* areas = reinterpret_cast<char**>(at);
  at += align16(sizeof(char*) * n);
  auto* descs = reinterpret_cast<DirectOpDesc*>(at);
  at += align16(sizeof(DirectOpDesc) * ops.size());
  auto* reduceOps = reinterpret_cast<ReduceOp*>(at);
  at += sizeof(ReduceOp) * n * ops.size();
  auto* peerSend = reinterpret_cast<uint64_t*>(at);
  for (size_t p = 0; p < n; ++p) areas[p] = areas_[p];
  for (size_t o = 0; o < ops.size(); ++o) {
    const DirectRequest& r = ops[o].req;
    DirectOpDesc& d = descs[o];
    d = DirectOpDesc{};
    d.coll = r.coll;
    if (r.coll == DirectCollective::kAllReduceOneShot || r.coll == DirectCollective::kAllReduceTwoShot) {
      d.coll = cudaDirectShot(r.count * dtypeSize(r.op.dtype), nranks_);
    }
    d.send = static_cast<const char*>(r.send);
    d.recv = static_cast<char*>(r.recv);
    d.count = r.count;
    d.lanes = r.lanes > 0 && static_cast<uint32_t>(r.lanes) < layout_.nlanes ? static_cast<uint32_t>(r.lanes)
                                                                             : layout_.nlanes;
    if (d.lanes < layout_.nlanes) {
      BRAID_INFO(kLogColl, "rank %d: NVLS-style operation %zu runs on %u of %u lanes (nvlsCTAs)", rank_, o, d.lanes,
                 layout_.nlanes);
    }
    d.stageOp = r.op;  // PreMulSum multiplies by this rank's scalar as it stages; avg divides only at the end
    ReduceOp combine = r.op;
    if (combine.kind == OpKind::kPreMulSum) combine.kind = OpKind::kSum;
    for (size_t p = 0; p < n; ++p) reduceOps[o * n + p] = combine;
    d.reduceOps = reduceOps + o * n;
    d.multicast = mc_ != nullptr && mcOpFor(r.op.dtype, r.op.kind) != McOp::kNone;
    if (readInPlace(d, peerSend + o * n)) {
      d.peerSend = peerSend + o * n;
      BRAID_INFO(kLogColl, "rank %d: NVLS-style operation %zu reads sendbuff %p in place (registered)", rank_, o,
                 r.send);
      findSymmetric(&d);
      if (d.symKey[0] != 0) {
        BRAID_INFO(kLogColl | kLogNvls,
                   "rank %d: NVLS-style operation %zu: sendbuff and recvbuff in windows with multicast mappings: "
                   "symmetric rounds through the switch where every rank's match",
                   rank_, o);
      }
    }
  }
  work->ops = descs;
  work->nops = static_cast<uint32_t>(ops.size());
  work->areas = areas;
  work->nranks = static_cast<uint32_t>(n);
  work->rank = static_cast<uint32_t>(rank_);
  work->layout = layout_;
  work->mc = mc_ != nullptr ? mc_->base() : nullptr;
  KernelArgs args;
  args.direct = work;
  args.nchannels = layout_.nlanes;
  return args;
}

}  // namespace braid
