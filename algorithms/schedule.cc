#include "algorithms/schedule.h"

#include <algorithm>

#include "src/common/status.h"

namespace braid {

const char* stepOpName(StepOp op) {
  switch (op) {
    case StepOp::kSend:
      return "send";
    case StepOp::kSendFromOutput:
      return "sendFromOutput";
    case StepOp::kCopySend:
      return "copySend";
    case StepOp::kRecv:
      return "recv";
    case StepOp::kRecvSend:
      return "recvSend";
    case StepOp::kRecvCopySend:
      return "recvCopySend";
    case StepOp::kRecvReduceSend:
      return "recvReduceSend";
    case StepOp::kRecvReduceCopy:
      return "recvReduceCopy";
    case StepOp::kRecvReduceCopySend:
      return "recvReduceCopySend";
    case StepOp::kCopy:
      return "copy";
    case StepOp::kRecvReducePartial:
      return "recvReducePartial";
    case StepOp::kRecvAccumulateSend:
      return "recvAccumulateSend";
    case StepOp::kRecvAccumulateCopySend:
      return "recvAccumulateCopySend";
    case StepOp::kRecvAccumulateCopy:
      return "recvAccumulateCopy";
    case StepOp::kRecvAccumulate:
      return "recvAccumulate";
    case StepOp::kSendPack:
      return "sendPack";
    case StepOp::kRecvPack:
      return "recvPack";
  }
  return "?";
}

bool stepRecvs(StepOp op) {
  switch (op) {
    case StepOp::kRecv:
    case StepOp::kRecvSend:
    case StepOp::kRecvCopySend:
    case StepOp::kRecvReduceSend:
    case StepOp::kRecvReduceCopy:
    case StepOp::kRecvReduceCopySend:
    case StepOp::kRecvReducePartial:
    case StepOp::kRecvAccumulateSend:
    case StepOp::kRecvAccumulateCopySend:
    case StepOp::kRecvAccumulateCopy:
    case StepOp::kRecvAccumulate:
    case StepOp::kRecvPack:
      return true;
    default:
      return false;
  }
}

bool stepSends(StepOp op) {
  switch (op) {
    case StepOp::kSend:
    case StepOp::kSendFromOutput:
    case StepOp::kCopySend:
    case StepOp::kRecvSend:
    case StepOp::kRecvCopySend:
    case StepOp::kRecvReduceSend:
    case StepOp::kRecvReduceCopySend:
    case StepOp::kRecvAccumulateSend:
    case StepOp::kRecvAccumulateCopySend:
    case StepOp::kSendPack:
      return true;
    default:
      return false;
  }
}

bool stepReadsInput(StepOp op) {
  switch (op) {
    case StepOp::kSend:
    case StepOp::kCopySend:
    case StepOp::kRecvReduceSend:
    case StepOp::kRecvReduceCopy:
    case StepOp::kRecvReduceCopySend:
    case StepOp::kCopy:
    case StepOp::kRecvReducePartial:
      return true;
    default:
      return false;
  }
}

bool stepWritesOutput(StepOp op) {
  switch (op) {
    case StepOp::kCopySend:
    case StepOp::kRecv:
    case StepOp::kRecvCopySend:
    case StepOp::kRecvReduceCopy:
    case StepOp::kRecvReduceCopySend:
    case StepOp::kCopy:
    case StepOp::kRecvReducePartial:
    case StepOp::kRecvAccumulateCopySend:
    case StepOp::kRecvAccumulateCopy:
    case StepOp::kRecvAccumulate:
    case StepOp::kRecvPack:
      return true;
    default:
      return false;
  }
}

bool stepReduces(StepOp op) {
  return op == StepOp::kRecvReduceSend || op == StepOp::kRecvReduceCopy || op == StepOp::kRecvReduceCopySend ||
         op == StepOp::kRecvReducePartial || stepAccumulates(op);
}

bool stepIsFinal(StepOp op) {
  return op == StepOp::kRecvReduceCopy || op == StepOp::kRecvReduceCopySend || op == StepOp::kCopy ||
         op == StepOp::kRecvAccumulateCopySend || op == StepOp::kRecvAccumulateCopy;
}

bool stepAccumulates(StepOp op) {
  return op == StepOp::kRecvAccumulateSend || op == StepOp::kRecvAccumulateCopySend ||
         op == StepOp::kRecvAccumulateCopy || op == StepOp::kRecvAccumulate;
}

size_t Program::numTiles() const {
  if (end <= begin || chunkElems == 0) return 0;
  size_t t = tileElems();
  return (end - begin + t - 1) / t;
}

void Program::blockRange(size_t tile, int block, int buf, size_t* offset, size_t* count) const {
  size_t tileStart = begin + tile * tileElems();
  size_t remaining = end - tileStart;
  if (layout == Layout::kTiled) {
    // A full tile has nblocks chunks; a short last tile spreads its remainder evenly (rounded up) so every rank's
    // block shrinks together and the pipeline stays balanced.
    size_t chunk = chunkElems;
    if (remaining < tileElems()) chunk = (remaining + static_cast<size_t>(nblocks) - 1) / static_cast<size_t>(nblocks);
    size_t start = std::min(remaining, chunk * static_cast<size_t>(block));
    *offset = tileStart + start;
    *count = std::min(chunk, remaining - start);
    return;
  }
  *offset = static_cast<size_t>(block) * stride[buf] + tileStart;
  *count = std::min(chunkElems, remaining);
}

std::string describeProgram(const Program& p) {
  std::string s = strPrintf("%s [%zu,%zu) chunk %zu nblocks %d:", p.layout == Layout::kTiled ? "tiled" : "strided",
                            p.begin, p.end, p.chunkElems, p.nblocks);
  for (const Step& st : p.steps) {
    s += strPrintf(" %s(b%d", stepOpName(st.op), st.block);
    if (st.op == StepOp::kSendPack || st.op == StepOp::kRecvPack) {
      for (const PackEntry& e : p.packs[static_cast<size_t>(st.block)])
        s += strPrintf(" %s%d", e.buf ? "o" : "i", e.block);
    }
    if (st.recvPeer >= 0) s += strPrintf(" <-%d", st.recvPeer);
    if (st.sendPeer >= 0) s += strPrintf(" ->%d", st.sendPeer);
    s += ")";
  }
  return s;
}

}  // namespace braid
