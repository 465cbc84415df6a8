// The built-in OFI network (ncclNet_v8_t "OFI"): libfabric reliable-datagram endpoints (FI_EP_RDM) with tagged
// messages. The provider is libfabric's choice, narrowed by libfabric's own FI_PROVIDER variable (tcp, which
// libfabric 1.17 serves as "tcp;ofi_rxm" for RDM; shm; efa in production).
//
// Connections. listen() opens an endpoint and puts its address in the handle. connect() opens an endpoint of its
// own, inserts the listener's address and sends a CONNECT control message carrying a random 31-bit comm id;
// accept() returns a receive comm for each CONNECT that arrived. Receive comms share their listener's endpoint;
// the comm id in the tag keeps their messages apart.
//
// Tags (64 bits): bit 63 control, bits 62..32 comm id, bits 31..0 the caller's tag. Endpoints are asked for
// FI_ORDER_SAS, so messages with equal tags match in send order, as the ABI requires.
//
// Peer loss. RDM is connectionless: a peer that vanishes is not reported by every provider. closeSend() therefore
// sends a CLOSE control message with its count of completed sends; the receiver then fails every receive that
// can no longer be satisfied (ncclRemoteError naming the peer) instead of waiting forever. A peer process killed
// outright is only detected when the provider reports it (tcp does for in-flight transfers); the transport
// above has its own deadline.
//
// libfabric is dlopen()ed by init (ofi_lib.h); without it the network has no devices.
#include <cstring>
#include <random>

#include "src/common/params.h"
#include "transports/net/libfabric/ofi_internal.h"
#include "transports/net/net_common.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace net {
namespace ofi {
namespace {

// ---- ABI ----

ncclResult_t ofiInit(ncclDebugLogger_t logFn) {
  initBuiltin(logFn);
  std::lock_guard<std::mutex> lk(gMu);
  if (!gDevices.empty()) return ncclSuccess;  // already initialised (devices live until exit)
  // No libfabric means no OFI devices, not an error: the loader falls back, and NCCL_NET=OFI says why.
  const OfiLib* loaded = libraryOrNoDevices(loadOfiLib(), "OFI");
  if (loaded == nullptr) return ncclSuccess;
  const OfiLib& lib = *loaded;
  fi_info* hints = lib.dupInfo(nullptr);  // fi_allocinfo()
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  fi_info* list = nullptr;
  int rc = lib.getInfo(FI_VERSION(1, 10), nullptr, nullptr, 0, hints, &list);
  lib.freeInfo(hints);
  if (rc == -FI_ENODATA) {
    BRAID_NET_INFO("NET/OFI : No provider offers reliable tagged endpoints (FI_EP_RDM, FI_TAGGED).");
    return ncclSuccess;  // zero devices
  }
  if (rc != 0) return BRAID_NET_RESULT(ofiError(rc, "fi_getinfo"));
  // Devices: libfabric's first provider, one per domain (its first address format, IPv4 before IPv6). On the
  // tcp provider a domain is an interface: OFI_NCCL_EXCLUDE_TCP_IF's (loopback) are left out unless nothing else
  // is there, since connections spread over every device and loopback reaches no other host.
  std::string prov = list->fabric_attr->prov_name;
  const std::string exclude = "," + params::OfiExcludeTcpIf() + ",";
  const bool tcp = prov.rfind("tcp", 0) == 0;
  auto listed = [&](const fi_info* i) {
    return exclude.find(std::string(",") + i->domain_attr->name + ",") != std::string::npos;
  };
  bool others = false;
  for (fi_info* i = list; i != nullptr && tcp; i = i->next) {
    others = others || (prov == i->fabric_attr->prov_name && !listed(i));
  }
  for (fi_info* i = list; i != nullptr; i = i->next) {
    if (prov != i->fabric_attr->prov_name) continue;
    if (others && listed(i)) continue;
    std::string name = prov + "/" + i->domain_attr->name;
    bool dup = false;
    for (const Device& d : gDevices) dup = dup || d.name == name;
    if (dup) continue;
    Device d;
    d.info = lib.dupInfo(i);
    d.name = name;
    gDevices.push_back(d);
  }
  lib.freeInfo(list);
  std::string names;
  for (size_t i = 0; i < gDevices.size(); ++i) names += " [" + std::to_string(i) + "]" + gDevices[i].name;
  BRAID_NET_INFO("NET/OFI : Using libfabric %u.%u:%s", FI_MAJOR(lib.version()), FI_MINOR(lib.version()), names.c_str());
  return ncclSuccess;
}

ncclResult_t ofiDevices(int* ndev) {
  if (ndev == nullptr) return BRAID_NET_RESULT(invalidArgument("NET/OFI : devices: ndev is null"));
  std::lock_guard<std::mutex> lk(gMu);
  *ndev = static_cast<int>(gDevices.size());
  return ncclSuccess;
}

ncclResult_t ofiGetProperties(int dev, ncclNetProperties_v8_t* props) {
  std::lock_guard<std::mutex> lk(gMu);
  if (props == nullptr || dev < 0 || dev >= static_cast<int>(gDevices.size())) {
    return BRAID_NET_RESULT(
        invalidArgument("NET/OFI : getProperties: device %d does not exist (%zu devices)", dev, gDevices.size()));
  }
  Device& d = gDevices[dev];
  *props = ncclNetProperties_v8_t{};
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = nullptr;
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 1;  // memory is registered on the device's domain, shared by its comms
  props->speed = 10000;
  props->maxComms = 65536;
  props->maxRecvs = kMaxGroup;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

Status listenImpl(int dev, Handle* h, void** listenComm) {
  BRAID_ASSIGN_OR_RETURN(std::shared_ptr<Endpoint> e, openEndpoint(dev));
  BRAID_ASSIGN_OR_RETURN(e->ctrlMr, registerMem(e->dev, e->ctrlBufs, sizeof(e->ctrlBufs)));
  {
    std::lock_guard<std::mutex> lk(e->mu);
    for (int i = 0; i < kCtrlRecvs; ++i) BRAID_RETURN_IF_ERROR(postCtrlRecv(*e, i));
  }
  memset(h, 0, sizeof(*h));
  h->magic = kHandleMagic;
  h->dev = static_cast<uint32_t>(dev);
  h->nameLen = static_cast<uint32_t>(e->rawName.size());
  memcpy(h->name, e->rawName.data(), e->rawName.size());
  *listenComm = new std::shared_ptr<Endpoint>(std::move(e));
  return Status::ok();
}

ncclResult_t ofiListen(int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/OFI : listen: handle or listenComm is null"));
  }
  *listenComm = nullptr;
  return BRAID_NET_RESULT(listenImpl(dev, static_cast<Handle*>(handle), listenComm));
}

// Posts the CONNECT; *posted false when the provider is busy (its connection setup needs the peer to progress).
Status postConnect(Comm& c, bool* posted) {
  Endpoint& e = *c.ep;
  std::lock_guard<std::mutex> lk(e.mu);
  *posted = false;
  ssize_t rc = fi_tsend(e.ep, &c.ctrlOut[0], sizeof(CtrlMsg), c.ctrlMr.desc, c.peerAddr,
                        ctrlTag(c.commId, kConnectKind), &c.ctrlOp[0].ctx);
  if (rc != 0 && rc != -FI_EAGAIN) return ofiError(static_cast<int>(rc), "fi_tsend(CONNECT)");
  *posted = rc == 0;
  c.ctrlOp[0].posted = *posted;
  return progress(e);
}

Status connectImpl(int dev, Handle* h, void** sendComm) {
  if (h->magic != kHandleMagic || h->nameLen == 0 || h->nameLen > kMaxName) {
    return invalidArgument("NET/OFI : connect: the handle is not an OFI-network listen handle");
  }
  if (h->pending != nullptr) {
    {
      std::lock_guard<std::mutex> lk(gPendingMu);
      if (gPending.count(h->pending) == 0) {
        return invalidArgument(
            "NET/OFI : connect: the handle's pending-connection state is not ours (pass the same "
            "handle buffer on every call)");
      }
    }
    auto* c = static_cast<Comm*>(h->pending);
    bool posted = false;
    Status s = postConnect(*c, &posted);
    if (s.isOk() && !posted && c->connectWait.expired()) {
      s = remoteError("NET/OFI : could not reach the listener %s within BRAID_TIMEOUT", c->peer.c_str());
    }
    if (!s.isOk() || posted) {
      std::lock_guard<std::mutex> lk(gPendingMu);
      gPending.erase(c);
      h->pending = nullptr;
    }
    if (!s.isOk()) {
      delete c;
      return s;
    }
    if (posted) *sendComm = c;
    return Status::ok();
  }
  BRAID_ASSIGN_OR_RETURN(std::shared_ptr<Endpoint> e, openEndpoint(dev));
  auto c = std::make_unique<Comm>();
  c->isSend = true;
  c->ep = e;
  std::random_device rd;
  c->commId = static_cast<uint32_t>(rd() & kCommIdMask);
  int rc = fi_av_insert(e->av, h->name, 1, &c->peerAddr, 0, nullptr);
  if (rc != 1) return systemError("NET/OFI : fi_av_insert of the listener's address failed (%d)", rc);
  c->peer = straddr(*e, h->name);
  for (Request& r : c->reqs) r.comm = c.get();
  BRAID_ASSIGN_OR_RETURN(c->ctrlMr, registerMem(e->dev, c->ctrlOut, sizeof(c->ctrlOut)));
  c->ctrlOut[0] = CtrlMsg{};
  c->ctrlOut[0].magic = kHandleMagic;
  c->ctrlOut[0].commId = c->commId;
  c->ctrlOut[0].kind = kConnectKind;
  c->ctrlOut[0].nameLen = static_cast<uint32_t>(e->rawName.size());
  memcpy(c->ctrlOut[0].name, e->rawName.data(), e->rawName.size());
  c->ctrlOut[1] = c->ctrlOut[0];
  c->ctrlOut[1].kind = kCloseKind;
  c->ctrlOp[0].kind = OpKind::kCtrlSend;
  c->ctrlOp[1].kind = OpKind::kCtrlSend;
  c->connectWait = WaitContext::withTimeout(nullptr, builtinTimeoutSec().load());
  bool posted = false;
  BRAID_RETURN_IF_ERROR(postConnect(*c, &posted));
  if (posted) {
    *sendComm = c.release();
    return Status::ok();
  }
  std::lock_guard<std::mutex> lk(gPendingMu);
  h->pending = c.get();
  gPending.insert(c.release());
  return Status::ok();
}

ncclResult_t ofiConnect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t**) {
  if (handle == nullptr || sendComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/OFI : connect: handle or sendComm is null"));
  }
  *sendComm = nullptr;
  return BRAID_NET_RESULT(connectImpl(dev, static_cast<Handle*>(handle), sendComm));
}

Status acceptImpl(std::shared_ptr<Endpoint>& e, void** recvComm) {
  std::lock_guard<std::mutex> lk(e->mu);
  BRAID_RETURN_IF_ERROR(progress(*e));
  if (e->connects.empty()) return Status::ok();
  CtrlMsg m = e->connects.front();
  e->connects.pop_front();
  auto c = std::make_unique<Comm>();
  c->isSend = false;
  c->ep = e;
  c->commId = m.commId;
  c->peer = m.nameLen <= kMaxName ? straddr(*e, m.name) : std::string("<unknown peer>");
  for (Request& r : c->reqs) r.comm = c.get();
  e->recvComms[c->commId] = c.get();
  auto early = e->earlyCloses.find(c->commId);
  if (early != e->earlyCloses.end()) {
    c->peerClosed = true;
    c->peerSends = early->second.sendsCompleted;
    e->earlyCloses.erase(early);
  }
  *recvComm = c.release();
  return Status::ok();
}

ncclResult_t ofiAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t**) {
  if (listenComm == nullptr || recvComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/OFI : accept: listenComm or recvComm is null"));
  }
  *recvComm = nullptr;
  return BRAID_NET_RESULT(acceptImpl(*static_cast<std::shared_ptr<Endpoint>*>(listenComm), recvComm));
}

ncclResult_t ofiRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/OFI : regMr: comm or mhandle is null"));
  }
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST) {
    return BRAID_NET_RESULT(
        invalidArgument("NET/OFI : regMr: memory type %d is not supported (host memory only)", type));
  }
  Result<MemHandle> mh = registerMem(static_cast<Comm*>(comm)->ep->dev, data, size);
  if (!mh.isOk()) return BRAID_NET_RESULT(mh.status());
  *mhandle = new MemHandle(mh.value());
  return ncclSuccess;
}

ncclResult_t ofiRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return BRAID_NET_RESULT(internalError("NET/OFI : regMrDmaBuf: DMA-BUF registration is not implemented"));
}

ncclResult_t ofiDeregMr(void*, void* mhandle) {
  auto* mh = static_cast<MemHandle*>(mhandle);
  if (mh == nullptr) return ncclSuccess;
  if (mh->mr != nullptr) fi_close(&mh->mr->fid);
  delete mh;
  return ncclSuccess;
}

Request* allocRequest(Comm& c) {
  for (Request& r : c.reqs) {
    if (!r.used) {
      r = Request();
      r.comm = &c;
      r.used = true;
      return &r;
    }
  }
  return nullptr;
}

Status postImpl(Comm& c, int n, void** data, const size_t* sizes, const int* tags, void** mhandles, void** request) {
  std::lock_guard<std::mutex> lk(c.ep->mu);
  if (!c.isSend && c.peerClosed && c.completed >= c.peerSends) {
    return remoteError("NET/OFI : peer %s closed the connection", c.peer.c_str());
  }
  Request* r = allocRequest(c);
  if (r == nullptr) return Status::ok();  // NCCL_NET_MAX_REQUESTS in flight
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = static_cast<char*>(data[i]);
    r->cap[i] = sizes[i];
    r->tags[i] = tags[i];
    auto* mh = mhandles != nullptr ? static_cast<MemHandle*>(mhandles[i]) : nullptr;
    r->desc[i] = mh != nullptr ? mh->desc : nullptr;
    r->ops[i].kind = OpKind::kData;
    r->ops[i].req = r;
    r->ops[i].slot = i;
  }
  Status s = postPending(*c.ep, *r);
  if (!s.isOk()) {
    if (r->outstanding() == 0)
      r->used = false;
    else
      r->error = s;
    return s;
  }
  *request = r;
  return Status::ok();
}

ncclResult_t ofiIsend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  if (sendComm == nullptr || request == nullptr || size < 0 || (data == nullptr && size > 0)) {
    return BRAID_NET_RESULT(
        invalidArgument("NET/OFI : isend: bad arguments (comm %p, data %p, size %d)", sendComm, data, size));
  }
  *request = nullptr;
  auto* c = static_cast<Comm*>(sendComm);
  if (!c->isSend) return BRAID_NET_RESULT(invalidUsage("NET/OFI : isend on a receive comm"));
  size_t sz = static_cast<size_t>(size);
  return BRAID_NET_RESULT(postImpl(*c, 1, &data, &sz, &tag, &mhandle, request));
}

ncclResult_t ofiIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (recvComm == nullptr || request == nullptr || data == nullptr || sizes == nullptr || tags == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/OFI : irecv: null argument"));
  }
  *request = nullptr;
  if (n < 1 || n > kMaxGroup) {
    return BRAID_NET_RESULT(invalidArgument("NET/OFI : irecv: n=%d buffers (1..%d)", n, kMaxGroup));
  }
  size_t sz[kMaxGroup];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return BRAID_NET_RESULT(invalidArgument("NET/OFI : irecv: sizes[%d]=%d", i, sizes[i]));
    sz[i] = static_cast<size_t>(sizes[i]);
  }
  auto* c = static_cast<Comm*>(recvComm);
  if (c->isSend) return BRAID_NET_RESULT(invalidUsage("NET/OFI : irecv on a send comm"));
  return BRAID_NET_RESULT(postImpl(*c, n, data, sz, tags, mhandles, request));
}

ncclResult_t ofiIflush(void*, int, void**, int*, void**, void** request) {
  if (request != nullptr) *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

Status testImpl(Request* r, int* done, int* sizes) {
  Comm& c = *r->comm;
  std::lock_guard<std::mutex> lk(c.ep->mu);
  if (!r->used || r->abandoned) return invalidArgument("NET/OFI : test: request %p is not in flight", (void*)r);
  Status s = progress(*c.ep);
  if (s.isOk() && r->error.isOk()) s = postPending(*c.ep, *r);
  if (!s.isOk() && r->error.isOk()) r->error = s;
  if (!r->error.isOk()) {
    // Posted receives still name this request's buffers: cancel them; the slot is freed when they report.
    for (int i = 0; i < r->n; ++i) {
      if (r->ops[i].posted && !r->ops[i].done) fi_cancel(&c.ep->ep->fid, &r->ops[i].ctx);
    }
    if (r->outstanding() == 0) {
      r->used = false;
    } else {
      r->abandoned = true;
    }
    return r->error;
  }
  for (int i = 0; i < r->n; ++i) {
    if (!r->ops[i].done) return Status::ok();
  }
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->got[i]);
  }
  r->used = false;
  *done = 1;
  return Status::ok();
}

ncclResult_t ofiTest(void* request, int* done, int* sizes) {
  if (request == nullptr || done == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/OFI : test: request or done is null"));
  }
  *done = 0;
  return BRAID_NET_RESULT(testImpl(static_cast<Request*>(request), done, sizes));
}

ncclResult_t ofiCloseSend(void* sendComm) {
  auto* c = static_cast<Comm*>(sendComm);
  if (c == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lk(c->ep->mu);
    c->ctrlOut[1].sendsCompleted = c->completed;
    ssize_t rc = -FI_EAGAIN;
    WaitContext wait = WaitContext::withTimeout(nullptr, 1.0);
    while (rc == -FI_EAGAIN && !wait.expired()) {  // the provider may be busy; tell the peer if at all possible
      rc = fi_tsend(c->ep->ep, &c->ctrlOut[1], sizeof(CtrlMsg), c->ctrlMr.desc, c->peerAddr,
                    ctrlTag(c->commId, kCloseKind), &c->ctrlOp[1].ctx);
      if (rc == -FI_EAGAIN) (void)progress(*c->ep);
    }
    if (rc != 0)
      BRAID_NET_INFO("NET/OFI : could not tell %s about the close: %s", c->peer.c_str(),
                     ofiLib()->strError(static_cast<int>(-rc)));
    if (rc == 0) {
      c->ctrlOp[1].posted = true;
      drain(*c, 1000, true);  // tell the peer, then let go
    }
    int inFlight = 0;
    for (Request& r : c->reqs) inFlight += r.used ? r.outstanding() : 0;
    if (inFlight > 0) {
      // Closing an endpoint under a transfer the peer is still reading crashes some providers (shm unmaps the
      // region the receiver reads). Keep this one, idle, until the process exits.
      BRAID_NET_INFO("NET/OFI : send comm to %s closed with %d send(s) in flight; its endpoint stays open until exit",
                     c->peer.c_str(), inFlight);
      std::lock_guard<std::mutex> g(gMu);
      gOrphans.emplace_back(c);
      return ncclSuccess;
    }
  }
  if (c->ctrlMr.mr != nullptr) fi_close(&c->ctrlMr.mr->fid);
  delete c;
  return ncclSuccess;
}

ncclResult_t ofiCloseRecv(void* recvComm) {
  auto* c = static_cast<Comm*>(recvComm);
  if (c == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lk(c->ep->mu);
    drain(*c, 200, false);
    c->ep->recvComms.erase(c->commId);
    bool busy = false;
    for (Request& r : c->reqs) busy = busy || (r.used && r.outstanding() > 0);
    if (busy) {
      // The shared endpoint may still report on these buffers: keep the comm until the endpoint closes.
      std::shared_ptr<Endpoint> e = std::move(c->ep);
      e->graveyard.emplace_back(c);
      return ncclSuccess;
    }
  }
  delete c;
  return ncclSuccess;
}

ncclResult_t ofiCloseListen(void* listenComm) {
  auto* e = static_cast<std::shared_ptr<Endpoint>*>(listenComm);
  if (e == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lk((*e)->mu);
    if ((*e)->recvComms.empty()) {
      for (int i = 0; i < kCtrlRecvs; ++i) fi_cancel(&(*e)->ep->fid, &(*e)->ctrlOps[i].ctx);
      (void)progress(**e);
    }
  }
  delete e;  // the endpoint lives on while receive comms use it
  return ncclSuccess;
}

ncclResult_t ofiGetDeviceMr(void*, void*, void**) {
  return BRAID_NET_RESULT(internalError("NET/OFI : getDeviceMr: no device offload"));
}
ncclResult_t ofiIrecvConsumed(void*, int, void*) {
  return ncclSuccess;
}

const ncclNet_v8_t kOfiNet = {
    "OFI",        ofiInit,        ofiDevices,     ofiGetProperties, ofiListen,        ofiConnect, ofiAccept,
    ofiRegMr,     ofiRegMrDmaBuf, ofiDeregMr,     ofiIsend,         ofiIrecv,         ofiIflush,  ofiTest,
    ofiCloseSend, ofiCloseRecv,   ofiCloseListen, ofiGetDeviceMr,   ofiIrecvConsumed,
};

}  // namespace
}  // namespace ofi

const ncclNet_v8_t* ofiNetTable() {
  return &ofi::kOfiNet;
}

}  // namespace net
}  // namespace braid
