// The network transport: connectors between ranks on different hosts, and between processes of one host when
// NCCL_SHM_DISABLE=1. Each end keeps the same FIFO as the in-process transport, in its own memory; one proxy
// thread per process moves filled slots across the network (transports/net/net_plugin.h) and returns credits:
//
//   sender:   executor fills slot k, bumps tail  ->  proxy isend(slot k)  ->  done: proxy bumps head (slot free)
//   receiver: proxy irecv(slot k) while k < head + 8  ->  done: proxy bumps tail  ->  executor consumes, bumps head
//
// So a sender never has more than 8 slots in flight and a receiver only posts buffers it has free, exactly the
// credits of the shared-memory FIFO. Connections are made lazily at first use, like the other transports: the
// receiver listens and sends its handle through the bootstrap; the proxy drives connect/accept to completion
// without blocking the caller. A network failure marks the connector failed with the network's message, which
// the executor reports as ncclRemoteError naming the peer's rank and host.
//
// Only Simple slots cross the network: an LL operation's chunk travels in the Simple slot as one message, whose
// completion stands for the line flags (Connector::wholeMessages).
#pragma once

#include <string>
#include <vector>

#include "transports/transport.h"

namespace braid {

// The network transport itself is netTransport() (transports/transport.h); it answers which peers need it
// (Transport::canConnect / isNetwork) and its link speed (Transport::linkGBps).

// The network device a connection of `self` on `channel` uses: among the devices on self's NUMA node (all of
// them when none is, or self is not placed), the one at (self.rail + channel) modulo their count, so a host's
// ranks start on different devices and each rank's channels spread over them. devNuma[d] is device d's NUMA node
// (-1 unknown).
int pickNetDevice(const std::vector<int>& devNuma, const PeerInfo& self, int channel);

}  // namespace braid
