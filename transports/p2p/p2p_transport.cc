// The p2p transport: CUDA ranks of one host whose GPUs load and store each other's memory (NVLink, or PCIe within
// NCCL_P2P_LEVEL), and ranks that share one GPU. The receiver's FIFO lives in its own GPU's memory, allocated by
// the backend (DeviceMemory: cuMem physical memory, so one path serves every case); the sender's kernel writes
// slots there directly and the receiver's kernel reads them locally, as NCCL's P2P transport does.
//
// A sender that is a thread of the receiver's process uses the FIFO's device address (the receiver granted the
// sender's device access when it allocated). A sender in another process imports the memory from a POSIX
// descriptor the receiver exported and offered (src/common/fd_share.h); the offer is withdrawn when the receive
// side goes, and a fetched descriptor is closed as soon as the driver has imported it. Which peers use this
// transport is the communicator's decision (TransportConfig::p2pPeers), so both ends always agree.
#include <unistd.h>

#include <memory>

#include "src/common/fd_share.h"
#include "src/common/logging.h"
#include "transports/connect_blob.h"
#include "transports/transport.h"

namespace braid {
namespace {

bool sameProcess(const PeerInfo& self, const PeerInfo& peer) {
  return self.hostHash == peer.hostHash && self.pid == peer.pid;
}

// Where the slots start: the same layout as every other FIFO (control block, Simple slots, LL slots).
size_t slotsOffset(size_t slotBytes, size_t llSlotBytes) {
  return localFifoBytes(slotBytes, llSlotBytes) - (slotBytes + llSlotBytes) * kFifoSlots;
}

FifoView deviceView(char* base, size_t slotBytes, size_t llSlotBytes, bool isSend) {
  return FifoView::make(reinterpret_cast<FifoCtrl*>(base), base + slotsOffset(slotBytes, llSlotBytes), slotBytes,
                        llSlotBytes, isSend);
}

class P2pTransport : public Transport {
 public:
  const char* name() const override { return "p2p"; }

  bool canConnect(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer) const override {
    return cfg.device != nullptr && self.hostHash == peer.hostHash && peer.rank >= 0 &&
           static_cast<size_t>(peer.rank) < cfg.p2pPeers.size() && cfg.p2pPeers[static_cast<size_t>(peer.rank)] != 0;
  }

  Result<RecvSetup> setupRecv(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer, int channel,
                              size_t slotBytes, size_t llSlotBytes) override {
    if (cfg.device == nullptr) return internalError("the p2p transport needs a CUDA backend's device memory");
    const bool local = sameProcess(self, peer);
    FifoCtrl head;
    fifoCtrlInit(&head, slotBytes, llSlotBytes);
    std::vector<int> peers;
    if (local && peer.cudaDev >= 0 && peer.cudaDev != cfg.device->device()) peers.push_back(peer.cudaDev);
    BRAID_ASSIGN_OR_RETURN(DeviceFifoMem mem, cfg.device->alloc(localFifoBytes(slotBytes, llSlotBytes), &head,
                                                                sizeof(head), peers, !local));
    P2pBlob b{};
    strcpy(b.kind, "p2p");
    b.bytes = mem.bytes;
    b.slotBytes = slotBytes;
    b.llSlotBytes = llSlotBytes;
    b.pid = static_cast<int32_t>(getpid());
    b.device = cfg.device->device();
    std::shared_ptr<void> owner = mem.owner;
    if (local) {
      b.devPtr = reinterpret_cast<uint64_t>(mem.base);
      b.id = handoff_.put(mem.owner);
    } else {
      Result<FdTicket> t = offerFd(mem.exportFd);
      close(mem.exportFd);
      BRAID_RETURN_IF_ERROR(t.status().withContext(
          strPrintf("offering the p2p FIFO of channel %d from rank %d to rank %d", channel, peer.rank, self.rank)));
      b.ticket = t.value();
      const FdTicket ticket = b.ticket;
      owner = std::shared_ptr<void>(mem.base, [held = mem.owner, ticket](void*) { withdrawFd(ticket); });
    }
    RecvSetup setup;
    setup.connector =
        std::make_unique<Connector>(owner, deviceView(mem.base, slotBytes, llSlotBytes, false), peer, !local);
    setup.connector->setOwnedBytes(mem.bytes);
    memcpy(setup.blob, &b, sizeof(b));
    return setup;
  }

  Result<std::unique_ptr<Connector>> connectSend(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer,
                                                 int channel, const char* blob) override {
    if (cfg.device == nullptr) return internalError("the p2p transport needs a CUDA backend's device memory");
    BRAID_ASSIGN_OR_RETURN(P2pBlob b, decodeP2pBlob(blob, peer, 0));
    const size_t need = localFifoBytes(b.slotBytes, b.llSlotBytes);
    if (b.bytes < need) {
      return internalError("rank %d's p2p FIFO description announces %llu bytes, less than its slots need (%zu)",
                           peer.rank, static_cast<unsigned long long>(b.bytes), need);
    }
    std::shared_ptr<void> owner;
    char* base = nullptr;
    const bool local = sameProcess(self, peer);
    if (local) {
      BRAID_ASSIGN_OR_RETURN(owner, handoff_.take(b.id, "p2p", peer.rank));
      base = reinterpret_cast<char*>(b.devPtr);
    } else {
      const std::string what = strPrintf("attaching to rank %d's p2p FIFO (channel %d, its GPU %d)", peer.rank, channel,
                                         static_cast<int>(b.device));
      Result<int> fd = fetchFd(b.ticket, cfg.timeoutSec);
      BRAID_RETURN_IF_ERROR(fd.status().withContext(what));
      Result<DeviceFifoMem> mem = cfg.device->import(fd.value(), b.bytes);
      close(fd.value());
      BRAID_RETURN_IF_ERROR(mem.status().withContext(what));
      owner = mem.value().owner;
      base = mem.value().base;
    }
    return std::make_unique<Connector>(owner, deviceView(base, b.slotBytes, b.llSlotBytes, true), peer, !local);
  }

 private:
  FifoHandoff handoff_;
};

}  // namespace

Transport* p2pTransport() {
  static P2pTransport t;
  return &t;
}

}  // namespace braid
