#include "src/core/planner.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "algorithms/alltoall/bruck.h"
#include "algorithms/ring/ring.h"
#include "src/backends/common/ll128_ops.h"
#include "src/backends/common/ll_ops.h"

namespace braid {
namespace {

// Channels used by a collective of `bytes`: small operations stay on one channel (more would only add latency).
int channelsFor(size_t bytes, int nChannels) {
  constexpr size_t kMinBytesPerChannel = 64 * 1024;
  size_t n = std::max<size_t>(1, bytes / kMinBytesPerChannel);
  return static_cast<int>(std::min<size_t>(n, static_cast<size_t>(nChannels)));
}

// A tuner plugin's channel count when it gave one, else the size rule; then the call's ncclCollConfig_t bounds;
// always within the communicator's channels and no more than the operation has alignment units (a channel never
// gets an empty range).
int channelsOf(const PendingOp& op, const FifoChoice& choice, size_t align, int nChannels) {
  if (choice.nChannels <= 0 && op.minChannels <= 0 && op.maxChannels <= 0) return channelsFor(unitBytes(op), nChannels);
  int n = choice.nChannels > 0 ? std::min(choice.nChannels, nChannels) : channelsFor(unitBytes(op), nChannels);
  if (op.maxChannels > 0) n = std::min(n, op.maxChannels);
  if (op.minChannels > 0) n = std::max(n, std::min(op.minChannels, nChannels));
  const size_t units = std::max<size_t>(1, (op.count + align - 1) / align);
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(n), units)));
}

// Point-to-point traffic between two ranks uses one channel, the same on both sides.
int p2pChannel(int src, int dst, int nChannels) {
  return (src + dst) % nChannels;
}

// A tree program is built over positions; its peers become ranks.
void mapTreePeers(const PlanShape& s, Program* prog) {
  for (Step& st : prog->steps) {
    if (st.sendPeer >= 0) st.sendPeer = s.sched->treeOrder[static_cast<size_t>(st.sendPeer)];
    if (st.recvPeer >= 0) st.recvPeer = s.sched->treeOrder[static_cast<size_t>(st.recvPeer)];
  }
}

int treePos(const PlanShape& s, int r) {
  return s.sched->treePos[static_cast<size_t>(r)];
}

// The (channel, Program) list of one operation.
Status planPrograms(const PlanShape& s, const PendingOp& op, const FifoChoice& choice, size_t chunkElems,
                    std::vector<std::pair<int, Program>>* progs) {
  const size_t elemSize = dtypeSize(op.dtype);
  const size_t align = std::max<size_t>(1, 256 / elemSize);
  const bool isP2p = op.kind == CollKind::kSend || op.kind == CollKind::kRecv;
  const bool a2a = op.kind == CollKind::kAlltoAll;
  const bool tree = !isP2p && !a2a && choice.algo == AlgoId::kTree;
  if (a2a) {
    // A slot carries a whole pack: each block gets its share of it.
    const size_t packElems = std::max<size_t>(1, chunkElems / static_cast<size_t>(bruckMaxPack(s.nranks)));
    const int nch = channelsFor(unitBytes(op) * static_cast<size_t>(s.nranks), s.nChannels);
    for (int c = 0; c < nch; ++c) {
      BruckParams bp{s.nranks, s.rank, op.count, 0, 0, packElems};
      channelRange(op.count, nch, c, align, &bp.begin, &bp.end);
      BRAID_ASSIGN_OR_RETURN(Program prog, buildBruckProgram(bp));
      progs->emplace_back(c, std::move(prog));
    }
  } else if (isP2p) {
    const bool isSend = op.kind == CollKind::kSend;
    const int peer = op.root;
    const int c = isSend ? p2pChannel(s.rank, peer, s.nChannels) : p2pChannel(peer, s.rank, s.nChannels);
    progs->emplace_back(c, buildP2pProgram(isSend, peer, 0, op.count, chunkElems));
  } else if (tree && op.kind != CollKind::kAllReduce) {
    // Reduce and broadcast over one tree rooted at the root.
    const bool reduce = op.kind == CollKind::kReduce;
    const int nch = channelsOf(op, choice, align, s.nChannels);
    for (int c = 0; c < nch; ++c) {
      TreeParams tp{s.nranks, treePos(s, s.rank), 0, 0, 0, chunkElems};
      channelRange(op.count, nch, c, align, &tp.begin, &tp.end);
      BRAID_ASSIGN_OR_RETURN(Program prog, buildTreeRootedProgram(reduce, treePos(s, op.root), tp));
      mapTreePeers(s, &prog);
      progs->emplace_back(c, std::move(prog));
    }
  } else if (tree) {
    // Double binary tree: each channel's range is halved between the two trees.
    const int nch = channelsOf(op, choice, align, s.nChannels);
    for (int c = 0; c < nch; ++c) {
      size_t b = 0, e = 0;
      channelRange(op.count, nch, c, align, &b, &e);
      // Deterministic mode keeps every element on tree 0, so its reduction order never depends on the split.
      const size_t mid = s.deterministic ? e : std::min(e, b + ((e - b) / 2 + align - 1) / align * align);
      for (int which = 0; which < (s.deterministic ? 1 : 2); ++which) {
        TreeParams tp{s.nranks, treePos(s, s.rank), which, which == 0 ? b : mid, which == 0 ? mid : e, chunkElems};
        std::vector<Program> parts;
        if (s.sched->hostTrees) {
          tp.rank = s.rank;
          BRAID_ASSIGN_OR_RETURN(parts, buildTreeAllReduceProgramsFor(s.sched->myTree[which], tp));
        } else {
          BRAID_ASSIGN_OR_RETURN(parts, buildTreeAllReducePrograms(tp));
          for (Program& prog : parts) mapTreePeers(s, &prog);
        }
        for (Program& prog : parts) progs->emplace_back(c, std::move(prog));
      }
    }
  } else {
    const int nch = channelsOf(op, choice, align, s.nChannels);
    for (int c = 0; c < nch; ++c) {
      RingParams rp{op.kind, s.sched->rings[static_cast<size_t>(c)], s.rank, op.root, op.count, 0, 0, chunkElems};
      channelRange(op.count, nch, c, align, &rp.begin, &rp.end);
      BRAID_ASSIGN_OR_RETURN(Program prog, buildRingProgram(rp));
      progs->emplace_back(c, std::move(prog));
    }
  }
  return Status::ok();
}

}  // namespace

size_t unitBytes(const PendingOp& op) {
  return op.count * dtypeSize(op.dtype);
}

bool Link::operator<(const Link& o) const {
  return std::tie(channel, peer, lane) < std::tie(o.channel, o.peer, o.lane);
}

Status planOps(const PlanShape& s, const std::vector<PlanOp>& ops, Plan* plan) {
  std::set<Link> sends, recvs;
  for (const PlanOp& po : ops) {
    const PendingOp& op = *po.op;
    const size_t elemSize = dtypeSize(op.dtype);
    const bool ll = po.choice.proto == ProtoId::kLL;
    const bool ll128 = po.choice.proto == ProtoId::kLL128;
    // An LL slot carries half its bytes as payload; as LL128 lines, 120 of every 128.
    const size_t chunkBytes = ll      ? llPayloadCapacity(s.fifo.llSlotBytes)
                              : ll128 ? ll128PayloadCapacity(s.fifo.llSlotBytes)
                                      : s.fifo.slotBytes;
    const size_t chunkElems = std::max<size_t>(1, chunkBytes / elemSize);
    const bool perRank =
        op.kind == CollKind::kAllGather || op.kind == CollKind::kReduceScatter || op.kind == CollKind::kAlltoAll;
    plan->totalBytes += unitBytes(op) * (perRank ? static_cast<size_t>(s.nranks) : 1);
    std::vector<std::pair<int, Program>> progs;
    BRAID_RETURN_IF_ERROR(planPrograms(s, op, po.choice, chunkElems, &progs));
    const bool tree = po.choice.algo == AlgoId::kTree && op.kind != CollKind::kSend && op.kind != CollKind::kRecv &&
                      op.kind != CollKind::kAlltoAll;
    for (auto& [c, prog] : progs) {
      PlannedWork w;
      w.channel = c;
      w.prog = std::move(prog);
      w.input = op.sendbuff;
      w.output = op.recvbuff;
      w.elemSize = elemSize;
      w.op = op.op;
      w.proto = po.choice.proto;
      // A tree reduce's interior ranks accumulate in an output NCCL does not give them (only the root's counts).
      if (tree && op.kind == CollKind::kReduce && s.rank != op.root &&
          treeReduceWritesOutput(s.nranks, treePos(s, s.rank), treePos(s, op.root))) {
        w.outputScratchBytes = op.count * elemSize;
      }
      if (ll || ll128) {
        w.llStagingBytes = std::min(w.prog.chunkElems, w.prog.end - w.prog.begin) * elemSize *
                           (op.kind == CollKind::kAlltoAll ? static_cast<size_t>(bruckMaxPack(s.nranks)) : 1);
      }
      for (const Step& st : w.prog.steps) {
        if (st.sendPeer >= 0) sends.insert(Link{c, st.sendPeer, w.prog.lane});
        if (st.recvPeer >= 0) recvs.insert(Link{c, st.recvPeer, w.prog.lane});
      }
      plan->works.push_back(std::move(w));
    }
  }
  plan->sendLinks.assign(sends.begin(), sends.end());
  plan->recvLinks.assign(recvs.begin(), recvs.end());
  return Status::ok();
}

}  // namespace braid
