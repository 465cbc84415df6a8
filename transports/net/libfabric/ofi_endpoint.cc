// Endpoints, completion handling and control messages of the OFI network (see ofi_net.cc).
#include <cstring>

#include "transports/net/libfabric/ofi_internal.h"

namespace braid {
namespace net {
namespace ofi {

std::mutex gMu;
std::vector<Device> gDevices;
std::atomic<uint64_t> gNextKey{1};
std::vector<Comm*> gOrphans;
std::mutex gPendingMu;
std::set<void*> gPending;

Status ofiError(int rc, const char* what) {
  const OfiLib* lib = ofiLib();
  return systemError("NET/OFI : %s failed: %s (%d)", what, lib != nullptr ? lib->strError(-rc) : "libfabric not loaded",
                     rc);
}

Endpoint::~Endpoint() {
  if (ep != nullptr) fi_close(&ep->fid);
  if (ctrlMr.mr != nullptr) fi_close(&ctrlMr.mr->fid);
  if (cq != nullptr) fi_close(&cq->fid);
  if (av != nullptr) fi_close(&av->fid);
  // graveyard's comms go after the endpoint: nothing can report on their buffers any more.
}

Result<MemHandle> registerMem(Device* dev, void* buf, size_t len) {
  MemHandle mh;
  if ((dev->info->domain_attr->mr_mode & FI_MR_LOCAL) == 0) return mh;
  uint64_t key = (dev->info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0 ? 0 : gNextKey.fetch_add(1);
  int rc = fi_mr_reg(dev->domain, buf, len, FI_SEND | FI_RECV, 0, key, 0, &mh.mr, nullptr);
  if (rc != 0) return ofiError(rc, "fi_mr_reg");
  mh.desc = fi_mr_desc(mh.mr);
  return mh;
}

static Status openDomain(Device* dev) {
  if (dev->domain != nullptr) return Status::ok();
  int rc = ofiLib()->fabric(dev->info->fabric_attr, &dev->fabric, nullptr);
  if (rc != 0) return ofiError(rc, "fi_fabric");
  rc = fi_domain(dev->fabric, dev->info, &dev->domain, nullptr);
  if (rc != 0) return ofiError(rc, "fi_domain");
  return Status::ok();
}

Result<std::shared_ptr<Endpoint>> openEndpoint(int devIndex) {
  std::lock_guard<std::mutex> lk(gMu);
  if (devIndex < 0 || devIndex >= static_cast<int>(gDevices.size())) {
    return invalidArgument("NET/OFI : device %d does not exist (%zu devices)", devIndex, gDevices.size());
  }
  Device* dev = &gDevices[devIndex];
  BRAID_RETURN_IF_ERROR(openDomain(dev));
  auto e = std::make_shared<Endpoint>();
  e->dev = dev;
  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_TAGGED;
  cqAttr.size = 1024;
  int rc = fi_cq_open(dev->domain, &cqAttr, &e->cq, nullptr);
  if (rc != 0) return ofiError(rc, "fi_cq_open");
  fi_av_attr avAttr{};
  avAttr.type = FI_AV_TABLE;
  rc = fi_av_open(dev->domain, &avAttr, &e->av, nullptr);
  if (rc != 0) return ofiError(rc, "fi_av_open");
  rc = fi_endpoint(dev->domain, dev->info, &e->ep, nullptr);
  if (rc != 0) return ofiError(rc, "fi_endpoint");
  rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return ofiError(rc, "fi_ep_bind(cq)");
  rc = fi_ep_bind(e->ep, &e->av->fid, 0);
  if (rc != 0) return ofiError(rc, "fi_ep_bind(av)");
  rc = fi_enable(e->ep);
  if (rc != 0) return ofiError(rc, "fi_enable");
  size_t len = kMaxName;
  e->rawName.resize(kMaxName);
  rc = fi_getname(&e->ep->fid, e->rawName.data(), &len);
  if (rc != 0) return ofiError(rc, "fi_getname (an address longer than 96 bytes does not fit the handle)");
  e->rawName.resize(len);
  char text[256];
  size_t textLen = sizeof(text);
  fi_av_straddr(e->av, e->rawName.data(), text, &textLen);
  e->name = text;
  return e;
}

std::string straddr(Endpoint& e, const char* raw) {
  char text[256];
  size_t len = sizeof(text);
  fi_av_straddr(e.av, raw, text, &len);
  return text;
}

Status postCtrlRecv(Endpoint& e, int i) {
  Op& op = e.ctrlOps[i];
  op = Op();
  op.kind = OpKind::kCtrlRecv;
  op.ctrlIndex = i;
  ssize_t rc =
      fi_trecv(e.ep, &e.ctrlBufs[i], sizeof(CtrlMsg), e.ctrlMr.desc, FI_ADDR_UNSPEC, kCtrlBit, ~kCtrlBit, &op.ctx);
  if (rc != 0) return ofiError(static_cast<int>(rc), "fi_trecv(control)");
  op.posted = true;
  return Status::ok();
}

// Fails receives on c that can no longer complete once the peer closed.
static void applyPeerClose(Comm& c) {
  if (!c.peerClosed || c.completed < c.peerSends) return;
  for (Request& r : c.reqs) {
    bool waiting = false;
    for (int i = 0; i < r.n; ++i) waiting = waiting || !r.ops[i].done;
    if (r.used && waiting && r.error.isOk()) {
      r.error = remoteError(
          "NET/OFI : peer %s closed the connection with this receive pending (%llu messages sent, "
          "%llu received)",
          c.peer.c_str(), static_cast<unsigned long long>(c.peerSends), static_cast<unsigned long long>(c.completed));
    }
  }
}

static void handleCtrl(Endpoint& e, const CtrlMsg& m) {
  if (m.magic != kHandleMagic) return;
  if (m.kind == kConnectKind) {
    e.connects.push_back(m);
  } else if (m.kind == kCloseKind) {
    auto it = e.recvComms.find(m.commId);
    if (it == e.recvComms.end()) {
      e.earlyCloses[m.commId] = m;  // CLOSE overtook accept()
      return;
    }
    it->second->peerClosed = true;
    it->second->peerSends = m.sendsCompleted;
    applyPeerClose(*it->second);
  }
}

// A request that failed and was reported keeps its slot until its last posted operation reports.
static void releaseIfAbandoned(Op* op) {
  if (op->kind == OpKind::kData && op->req != nullptr && op->req->abandoned && op->req->outstanding() == 0) {
    op->req->used = false;
    op->req->abandoned = false;
  }
}

// Reads the completion queue; e.mu held.
Status progress(Endpoint& e) {
  fi_cq_tagged_entry entries[16];
  while (true) {
    ssize_t n = fi_cq_read(e.cq, entries, 16);
    if (n == -FI_EAGAIN) return Status::ok();
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(e.cq, &err, 0) < 0) return systemError("NET/OFI : fi_cq_readerr failed");
      auto* op = static_cast<Op*>(err.op_context);
      if (op == nullptr) continue;
      op->done = true;
      if (op->kind == OpKind::kData && op->req != nullptr && err.err != FI_ECANCELED) {
        Comm& c = *op->req->comm;
        if (op->req->error.isOk()) {
          op->req->error = remoteError(
              "NET/OFI : %s peer %s failed: %s (provider: %s)", c.isSend ? "send to" : "receive from", c.peer.c_str(),
              ofiLib()->strError(err.err), fi_cq_strerror(e.cq, err.prov_errno, err.err_data, nullptr, 0));
        }
      }
      releaseIfAbandoned(op);
      continue;
    }
    if (n < 0) return ofiError(static_cast<int>(n), "fi_cq_read");
    for (ssize_t i = 0; i < n; ++i) {
      auto* op = static_cast<Op*>(entries[i].op_context);
      if (op == nullptr) continue;
      op->done = true;
      if (op->kind == OpKind::kCtrlRecv) {
        handleCtrl(e, e.ctrlBufs[op->ctrlIndex]);
        BRAID_RETURN_IF_ERROR(postCtrlRecv(e, op->ctrlIndex));
      } else if (op->kind == OpKind::kData) {
        op->req->got[op->slot] = op->req->comm->isSend ? op->req->cap[op->slot] : entries[i].len;
        op->req->comm->completed++;
        if (!op->req->comm->isSend) applyPeerClose(*op->req->comm);
        releaseIfAbandoned(op);
      }
    }
  }
}

// Posts the request's operations that are not posted yet; e.mu held. FI_EAGAIN leaves them for the next test().
Status postPending(Endpoint& e, Request& r) {
  Comm& c = *r.comm;
  for (int i = 0; i < r.n; ++i) {
    Op& op = r.ops[i];
    if (op.posted) continue;
    ssize_t rc =
        c.isSend
            ? fi_tsend(e.ep, r.data[i], r.cap[i], r.desc[i], c.peerAddr, dataTag(c.commId, r.tags[i]), &op.ctx)
            : fi_trecv(e.ep, r.data[i], r.cap[i], r.desc[i], FI_ADDR_UNSPEC, dataTag(c.commId, r.tags[i]), 0, &op.ctx);
    if (rc == -FI_EAGAIN) return Status::ok();
    if (rc != 0) return ofiError(static_cast<int>(rc), c.isSend ? "fi_tsend" : "fi_trecv");
    op.posted = true;
  }
  return Status::ok();
}

void drain(Comm& c, int timeoutMs, bool ctrlOnly) {
  for (Request& r : c.reqs) {
    for (int i = 0; i < r.n; ++i) {
      if (r.used && r.ops[i].posted && !r.ops[i].done && !c.isSend) fi_cancel(&c.ep->ep->fid, &r.ops[i].ctx);
    }
  }
  WaitContext wait = WaitContext::withTimeout(nullptr, timeoutMs / 1000.0);
  while (!wait.expired()) {
    bool busy = false;
    for (const Op& op : c.ctrlOp) busy = busy || (op.posted && !op.done);
    for (Request& r : c.reqs) busy = busy || (!ctrlOnly && r.used && r.outstanding() > 0);
    if (!busy) return;
    (void)progress(*c.ep);
  }
}

}  // namespace ofi
}  // namespace net
}  // namespace braid
