#include "algorithms/schedule.h"

#include "src/common/status.h"

namespace braid {

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
