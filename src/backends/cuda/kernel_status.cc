#include "src/backends/cuda/kernel_status.h"

#include "src/backends/common/mem_order.h"
#include "src/backends/common/rma_kernel.h"
#include "transports/transport.h"

namespace braid {
namespace {

Status signalFailure(const DevStatus& s, const RmaKernelWork& w, ptrdiff_t toHost, uint32_t code,
                     const KernelFailureContext& ctx) {
  const auto* steps = reinterpret_cast<const RmaKernelStep*>(reinterpret_cast<const char*>(w.steps) + toHost);
  const uint64_t awaited = s.item >= 0 && static_cast<uint32_t>(s.item) < w.nsteps ? steps[s.item].value : 0;
  switch (static_cast<DevStatusCode>(code)) {
    case DevStatusCode::kAborted:
      if (!ctx.peerGone->empty()) return remoteError("rank %d: %s", ctx.rank, ctx.peerGone->c_str());
      return remoteError(
          "rank %d: ncclWaitSignal stopped waiting for signal %llu from rank %d: the communicator was "
          "aborted or revoked",
          ctx.rank, static_cast<unsigned long long>(awaited), s.conn);
    case DevStatusCode::kTimeout:
      return remoteError(
          "rank %d: ncclWaitSignal: rank %d sent %llu signals, not the %llu awaited, within "
          "BRAID_TIMEOUT=%g s",
          ctx.rank, s.conn, static_cast<unsigned long long>(s.tile), static_cast<unsigned long long>(awaited),
          ctx.timeoutSec);
    default:
      return internalError("rank %d: %s failed (status %u)", ctx.rank, kRmaKernelName, code);
  }
}

}  // namespace

Status kernelFailure(const DevStatus& s, const KernelArgs& args, ProtoId proto, ptrdiff_t toHost,
                     const KernelFailureContext& ctx) {
  const uint32_t code = loadAcquire(&s.code);
  // A pointer into the kernel's work, read through the host's copy.
  auto onHost = [&](const auto* p) { return reinterpret_cast<decltype(p)>(reinterpret_cast<const char*>(p) + toHost); };
  if (args.rma != nullptr) return signalFailure(s, *onHost(args.rma), toHost, code, ctx);
  const int rank = ctx.rank;
  std::string peer = "no connector";
  const char* kernel = args.direct != nullptr ? kDirectKernelName : kernelName(proto);
  const char* unit = args.direct != nullptr ? "lane" : "channel";
  if (args.direct != nullptr) {
    peer = s.conn >= 0 ? strPrintf("waiting for rank %d", s.conn) : "";
  } else if (s.channel >= 0 && static_cast<uint32_t>(s.channel) < args.nchannels && s.conn >= 0) {
    const ChannelWorkDesc& ch = *onHost(args.channels + s.channel);
    if (static_cast<uint32_t>(s.conn) < ch.nconns) {
      const auto* c = static_cast<const Connector*>(onHost(ch.conns + s.conn)->owner);
      peer = strPrintf("%s rank %d", c->isSend() ? "sending to" : "receiving from", c->peer().rank);
    }
  }
  switch (static_cast<DevStatusCode>(code)) {
    case DevStatusCode::kAborted:
      if (!ctx.peerGone->empty()) return remoteError("rank %d: %s", rank, ctx.peerGone->c_str());
      return remoteError("rank %d: %s stopped on %s %d: the communicator was aborted", rank, kernel, unit, s.channel);
    case DevStatusCode::kPeerAborted:
      if (args.direct != nullptr) {
        return remoteError("rank %d: %s on lane %d: rank %d failed or was aborted", rank, kernel, s.channel, s.conn);
      }
      return remoteError("rank %d: %s on channel %d: the connection %s failed or was aborted", rank, kernel, s.channel,
                         peer.c_str());
    case DevStatusCode::kTimeout:
      return remoteError("rank %d: %s on %s %d: no progress for %.0f s %s (item %d, tile %llu, step %u; BRAID_TIMEOUT)",
                         rank, kernel, unit, s.channel, ctx.timeoutSec, peer.c_str(), s.item,
                         static_cast<unsigned long long>(s.tile), s.step);
    default:
      return internalError("rank %d: %s refused its work on %s %d (status %u)", rank, kernel, unit, s.channel, code);
  }
}

}  // namespace braid
