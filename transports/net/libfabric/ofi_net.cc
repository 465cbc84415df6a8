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
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "src/common/params.h"
#include "src/common/wait.h"
#include "transports/net/net_common.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace net {
namespace ofi {
namespace {

constexpr uint64_t kCtrlBit = 1ull << 63;
constexpr uint64_t kCommIdMask = 0x7fffffffull;
constexpr uint32_t kConnectKind = 1;
constexpr uint32_t kCloseKind = 2;
constexpr uint64_t kHandleMagic = 0x62726169642d4f46ULL;
constexpr int kMaxGroup = 8;
constexpr int kCtrlRecvs = 8;  // control receives kept posted on a listening endpoint
constexpr size_t kMaxName = 96;

uint64_t dataTag(uint32_t commId, int tag) {
  return (uint64_t{commId} << 32) | static_cast<uint32_t>(tag);
}
uint64_t ctrlTag(uint32_t commId, uint32_t kind) {
  return kCtrlBit | (uint64_t{commId} << 32) | kind;
}

Status ofiError(int rc, const char* what) {
  return systemError("NET/OFI : %s failed: %s (%d)", what, fi_strerror(-rc), rc);
}

struct Device {
  fi_info* info = nullptr;  // owned (fi_dupinfo)
  std::string name;         // "<provider>/<domain>"
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
};

std::mutex gMu;
std::vector<Device> gDevices;
std::atomic<uint64_t> gNextKey{1};

// The listen handle. connect() keeps a connection in progress in `pending` (the ABI lets it use the handle).
struct Handle {
  uint64_t magic;
  uint32_t dev;
  uint32_t nameLen;
  char name[kMaxName];
  uint64_t reserved;
  void* pending;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "OFI handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct CtrlMsg {
  uint64_t magic;
  uint32_t commId;
  uint32_t kind;
  uint64_t sendsCompleted;  // CLOSE: sends the peer saw complete
  uint32_t nameLen;         // CONNECT: the sender's endpoint address
  char name[kMaxName];
};

struct MemHandle {
  fid_mr* mr = nullptr;
  void* desc = nullptr;
};

struct Comm;
struct Request;

enum class OpKind { kData, kCtrlRecv, kCtrlSend };

// Context of one posted libfabric operation. fi_context2 must come first (FI_CONTEXT2 mode).
struct Op {
  fi_context2 ctx;
  OpKind kind = OpKind::kData;
  Request* req = nullptr;
  int slot = 0;
  bool posted = false;
  bool done = false;
  int ctrlIndex = 0;  // kCtrlRecv: which buffer of the endpoint
};

struct Request {
  Comm* comm = nullptr;
  bool used = false;
  bool abandoned = false;
  int n = 0;
  char* data[kMaxGroup] = {};
  size_t cap[kMaxGroup] = {};
  int tags[kMaxGroup] = {};
  void* desc[kMaxGroup] = {};
  size_t got[kMaxGroup] = {};
  Op ops[kMaxGroup];
  Status error;
  int outstanding() const {
    int k = 0;
    for (int i = 0; i < n; ++i) k += ops[i].posted && !ops[i].done ? 1 : 0;
    return k;
  }
};

// One libfabric endpoint with its completion queue and address vector. A send comm owns one; a listener's is
// shared by the receive comms accepted from it. `mu` guards the endpoint and every comm and request on it.
struct Endpoint {
  Device* dev = nullptr;
  fid_ep* ep = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  std::mutex mu;
  std::string name;  // printable address
  std::vector<char> rawName;
  // Listening endpoints only.
  CtrlMsg ctrlBufs[kCtrlRecvs];
  MemHandle ctrlMr;
  Op ctrlOps[kCtrlRecvs];
  std::deque<CtrlMsg> connects;         // CONNECTs not yet accepted
  std::map<uint32_t, Comm*> recvComms;  // by comm id
  std::map<uint32_t, CtrlMsg> earlyCloses;
  std::vector<std::unique_ptr<Comm>> graveyard;  // closed receive comms with operations still posted
  ~Endpoint();
};

struct Comm {
  bool isSend = false;
  uint32_t commId = 0;
  std::shared_ptr<Endpoint> ep;
  fi_addr_t peerAddr = FI_ADDR_UNSPEC;  // send comms: the listener
  std::string peer;
  Request reqs[NCCL_NET_MAX_REQUESTS];
  uint64_t completed = 0;  // messages completed on this comm
  bool peerClosed = false;
  uint64_t peerSends = 0;  // receive comms: the sender's completed sends at CLOSE
  CtrlMsg ctrlOut{};       // send comms: CONNECT / CLOSE payload
  Op ctrlOp;
  MemHandle ctrlMr;
  WaitContext connectWait;  // send comms: deadline of the CONNECT
};

// Send comms closed with sends in flight (see ofiCloseSend); never freed.
std::vector<Comm*> gOrphans;

// Send comms whose CONNECT is not posted yet; a handle's `pending` is trusted only when it is one of these.
std::mutex gPendingMu;
std::set<void*> gPending;

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

Status openDomain(Device* dev) {
  if (dev->domain != nullptr) return Status::ok();
  int rc = fi_fabric(dev->info->fabric_attr, &dev->fabric, nullptr);
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
void applyPeerClose(Comm& c) {
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

void handleCtrl(Endpoint& e, const CtrlMsg& m) {
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
void releaseIfAbandoned(Op* op) {
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
          op->req->error = remoteError("NET/OFI : %s peer %s failed: %s (provider: %s)",
                                       c.isSend ? "send to" : "receive from", c.peer.c_str(), fi_strerror(err.err),
                                       fi_cq_strerror(e.cq, err.prov_errno, err.err_data, nullptr, 0));
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

// ---- ABI ----

ncclResult_t ofiInit(ncclDebugLogger_t logFn) {
  builtinLogger().store(logFn);
  std::lock_guard<std::mutex> lk(gMu);
  if (!gDevices.empty()) return ncclSuccess;  // already initialised (devices live until exit)
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  fi_info* list = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 10), nullptr, nullptr, 0, hints, &list);
  fi_freeinfo(hints);
  if (rc == -FI_ENODATA) {
    BRAID_NET_INFO("NET/OFI : No provider offers reliable tagged endpoints (FI_EP_RDM, FI_TAGGED).");
    return ncclSuccess;  // zero devices
  }
  if (rc != 0) return BRAID_NET_RESULT(ofiError(rc, "fi_getinfo"));
  // Devices: libfabric's first provider, one per domain (its first address format, IPv4 before IPv6).
  std::string prov = list->fabric_attr->prov_name;
  for (fi_info* i = list; i != nullptr; i = i->next) {
    if (prov != i->fabric_attr->prov_name) continue;
    std::string name = prov + "/" + i->domain_attr->name;
    bool dup = false;
    for (const Device& d : gDevices) dup = dup || d.name == name;
    if (dup) continue;
    Device d;
    d.info = fi_dupinfo(i);
    d.name = name;
    gDevices.push_back(d);
  }
  fi_freeinfo(list);
  std::string names;
  for (size_t i = 0; i < gDevices.size(); ++i) names += " [" + std::to_string(i) + "]" + gDevices[i].name;
  BRAID_NET_INFO("NET/OFI : Using libfabric %u.%u:%s", FI_MAJOR(fi_version()), FI_MINOR(fi_version()), names.c_str());
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
  ssize_t rc = fi_tsend(e.ep, &c.ctrlOut, sizeof(CtrlMsg), c.ctrlMr.desc, c.peerAddr, ctrlTag(c.commId, kConnectKind),
                        &c.ctrlOp.ctx);
  if (rc != 0 && rc != -FI_EAGAIN) return ofiError(static_cast<int>(rc), "fi_tsend(CONNECT)");
  *posted = rc == 0;
  c.ctrlOp.posted = *posted;
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
  BRAID_ASSIGN_OR_RETURN(c->ctrlMr, registerMem(e->dev, &c->ctrlOut, sizeof(c->ctrlOut)));
  c->ctrlOut = CtrlMsg{};
  c->ctrlOut.magic = kHandleMagic;
  c->ctrlOut.commId = c->commId;
  c->ctrlOut.kind = kConnectKind;
  c->ctrlOut.nameLen = static_cast<uint32_t>(e->rawName.size());
  memcpy(c->ctrlOut.name, e->rawName.data(), e->rawName.size());
  c->ctrlOp.kind = OpKind::kCtrlSend;
  c->connectWait = WaitContext::withTimeout(nullptr, static_cast<double>(params::Timeout()));
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

// Waits (bounded) until no operation of c (only its control message with ctrlOnly) is outstanding, cancelling
// receives; e.mu held.
void drain(Comm& c, int maxPolls, bool ctrlOnly) {
  for (Request& r : c.reqs) {
    for (int i = 0; i < r.n; ++i) {
      if (r.used && r.ops[i].posted && !r.ops[i].done && !c.isSend) fi_cancel(&c.ep->ep->fid, &r.ops[i].ctx);
    }
  }
  for (int k = 0; k < maxPolls; ++k) {
    bool busy = c.ctrlOp.posted && !c.ctrlOp.done;
    for (Request& r : c.reqs) busy = busy || (!ctrlOnly && r.used && r.outstanding() > 0);
    if (!busy) return;
    (void)progress(*c.ep);
  }
}

ncclResult_t ofiCloseSend(void* sendComm) {
  auto* c = static_cast<Comm*>(sendComm);
  if (c == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lk(c->ep->mu);
    drain(*c, 1000, false);  // the CONNECT must be out before the CLOSE reuses its buffer
    c->ctrlOut.kind = kCloseKind;
    c->ctrlOut.sendsCompleted = c->completed;
    c->ctrlOp = Op();
    c->ctrlOp.kind = OpKind::kCtrlSend;
    ssize_t rc = fi_tsend(c->ep->ep, &c->ctrlOut, sizeof(CtrlMsg), c->ctrlMr.desc, c->peerAddr,
                          ctrlTag(c->commId, kCloseKind), &c->ctrlOp.ctx);
    if (rc == 0) {
      c->ctrlOp.posted = true;
      drain(*c, 200000, true);  // tell the peer, then let go; bounded
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
    drain(*c, 100000, false);
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
