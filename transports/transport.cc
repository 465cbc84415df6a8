// The transport registry: which transports exist, and the order a backend tries them in for each peer.
#include "transports/transport.h"

#include "src/common/params.h"

namespace braid {

const std::vector<Transport*>& hostTransports() {
  static const std::vector<Transport*> all = {inprocTransport(), shmTransport(), netTransport()};
  return all;
}

TransportConfig TransportConfig::fromParams() {
  TransportConfig cfg;
  cfg.timeoutSec = static_cast<double>(params::Timeout());
  cfg.shmDisable = params::ShmDisable() == 1;
  cfg.shmDir = params::ShmDir();
  return cfg;
}

uint64_t FifoHandoff::put(std::shared_ptr<void> owner, int takes) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_[++nextId_] = Pending{std::move(owner), takes};
  return nextId_;
}

void FifoHandoff::withdraw(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.erase(id);
}

Result<std::shared_ptr<void>> FifoHandoff::take(uint64_t id, const char* transport, int peerRank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    return internalError("%s FIFO %llu of rank %d not found", transport, static_cast<unsigned long long>(id), peerRank);
  }
  std::shared_ptr<void> owner = it->second.owner;
  if (--it->second.takes <= 0) pending_.erase(it);
  return owner;
}

Result<Transport*> selectTransport(const std::vector<Transport*>& transports, const TransportConfig& cfg,
                                   const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : transports) {
    if (t->canConnect(cfg, self, peer)) return t;
  }
  return internalError("no transport connects rank %d (host %s) and rank %d (host %s)", self.rank, self.hostname,
                       peer.rank, peer.hostname);
}

}  // namespace braid
