// The transport registry: which transports exist, and the order a backend tries them in for each peer.
#include "transports/transport.h"

namespace braid {

const std::vector<Transport*>& hostTransports() {
  static const std::vector<Transport*> all = {inprocTransport(), shmTransport(), netTransport()};
  return all;
}

Result<Transport*> selectTransport(const std::vector<Transport*>& transports, const PeerInfo& self,
                                   const PeerInfo& peer) {
  for (Transport* t : transports) {
    if (t->canConnect(self, peer)) return t;
  }
  return internalError("no transport connects rank %d (host %s) and rank %d (host %s)", self.rank, self.hostname,
                       peer.rank, peer.hostname);
}

Result<Transport*> selectTransport(const PeerInfo& self, const PeerInfo& peer) {
  return selectTransport(hostTransports(), self, peer);
}

}  // namespace braid
