// The built-in IB network (ncclNet_v8_t "IB"): InfiniBand / RoCE verbs over reliable-connected QPs.
//
// STATUS: compiled and initialised in CI, never run against hardware: the machines that built and tested it have
// no RDMA device (init reports zero devices and the loader falls back to Socket). Treat the data path as untested.
//
// Design (simpler than NCCL's net_ib, on purpose): one RC QP per connection; isend is a SEND_WITH_IMM carrying
// the tag, irecv posts one receive (maxRecvs = 1); the receiver checks that the immediate equals the posted tag.
// RNR retry is infinite (7), so a send waits in the HCA until its receive is posted. QP numbers, LID/GID, PSN and
// MTU are exchanged over a TCP side channel, which also tells each side when the other closes. NCCL's RDMA-write
// protocol with a CTS FIFO, multiple QPs per connection, adaptive routing and GPUDirect flush are not implemented.
//
// libibverbs is dlopen()ed by init (ibv_lib.h); without it the network has no devices.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "src/common/params.h"
#include "src/common/socket.h"
#include "src/common/wait.h"
#include "transports/net/ibverbs/ib_hca.h"
#include "transports/net/ibverbs/ibv_lib.h"
#include "transports/net/net_common.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace net {
namespace ib {
namespace {

constexpr uint64_t kHandleMagic = 0x62726169642d4942ULL;
constexpr int kCqDepth = 2 * NCCL_NET_MAX_REQUESTS + 8;

struct Device {
  std::string name;
  int port = 1;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr portAttr{};
  uint64_t guid = 0;
  int speedMbps = 0;
  int maxQp = 0;
  std::string pciPath;
};

std::mutex gMu;
std::vector<Device> gDevices;
bool gInitDone = false;
// libibverbs; set by init when it loads (every device, hence every comm, exists only then).
const IbvLib* gIbv = nullptr;

struct Handle {
  uint64_t magic;
  union {
    sockaddr sa;
    sockaddr_in in;
    sockaddr_in6 in6;
  } addr;
  uint32_t stage;
  uint32_t reserved;
  void* pending;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "IB handle must fit NCCL_NET_HANDLE_MAXSIZE");

// What each side sends the other over TCP.
struct QpInfo {
  uint64_t magic;
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;
  uint8_t mtu;
  uint8_t linkLayer;
  uint8_t gid[16];
};

struct Request;

struct Comm {
  bool isSend = false;
  Device* dev = nullptr;
  int fd = -1;  // TCP side channel
  std::string peer;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  QpInfo local{};
  QpInfo remote{};
  size_t infoSent = 0;
  size_t infoGot = 0;
  bool tcpConnected = false;
  bool qpReady = false;  // moved to RTR/RTS
  WaitContext wait;
  struct Req {
    bool used = false;
    bool done = false;
    int tag = 0;
    size_t size = 0;
    Status error;
  } reqs[NCCL_NET_MAX_REQUESTS];
  Clock::time_point lastPeerCheck{};
  Status connError;
  ~Comm() {
    if (qp != nullptr) gIbv->destroyQp(qp);
    if (cq != nullptr) gIbv->destroyCq(cq);
    if (fd >= 0) ::close(fd);
  }
};

struct ListenComm {
  int dev = 0;
  int fd = -1;
  std::vector<Comm*> pending;  // accepted TCP connections still exchanging QP info
};

std::mutex gPendingMu;
std::set<void*> gPending;

int rateMbps(const ibv_port_attr& a) {
  int perLane = 2500;  // SDR
  switch (a.active_speed) {
    case 2:
      perLane = 5000;
      break;  // DDR
    case 4:
    case 8:
      perLane = 10000;
      break;  // QDR, FDR10
    case 16:
      perLane = 14000;
      break;  // FDR
    case 32:
      perLane = 25000;
      break;  // EDR
    case 64:
      perLane = 50000;
      break;  // HDR
    case 128:
      perLane = 100000;
      break;  // NDR
    default:
      break;
  }
  int lanes = a.active_width == 1   ? 1
              : a.active_width == 2 ? 4
              : a.active_width == 4 ? 8
              : a.active_width == 8 ? 12
                                    : 2;
  return perLane * lanes;
}

Status checkKnobs(int* timeout, int* retry, int* gidIndex) {
  int64_t t = params::IbTimeout();
  int64_t r = params::IbRetryCnt();
  int64_t g = params::IbGidIndex();
  if (t < 1 || t > 31) return invalidArgument("NCCL_IB_TIMEOUT=%lld is out of range (1..31)", (long long)t);
  if (r < 0 || r > 7) return invalidArgument("NCCL_IB_RETRY_CNT=%lld is out of range (0..7)", (long long)r);
  if (g < -1 || g > 255) return invalidArgument("NCCL_IB_GID_INDEX=%lld is out of range (-1..255)", (long long)g);
  *timeout = static_cast<int>(t);
  *retry = static_cast<int>(r);
  *gidIndex = static_cast<int>(g);
  return Status::ok();
}

Status createQp(Comm& c) {
  Device& d = *c.dev;
  c.cq = gIbv->createCq(d.ctx, kCqDepth, nullptr, nullptr, 0);
  if (c.cq == nullptr) return errnoError(errno, "NET/IB : ibv_create_cq on %s", d.name.c_str());
  ibv_qp_init_attr init{};
  init.send_cq = c.cq;
  init.recv_cq = c.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = NCCL_NET_MAX_REQUESTS;
  init.cap.max_recv_wr = NCCL_NET_MAX_REQUESTS;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  c.qp = gIbv->createQp(d.pd, &init);
  if (c.qp == nullptr) return errnoError(errno, "NET/IB : ibv_create_qp on %s", d.name.c_str());
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(d.port);
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = gIbv->modifyQp(c.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) return errnoError(rc, "NET/IB : ibv_modify_qp(INIT) on %s", d.name.c_str());
  int timeout = 0, retry = 0, gidIndex = 0;
  BRAID_RETURN_IF_ERROR(checkKnobs(&timeout, &retry, &gidIndex));
  ibv_gid gid{};
  int useGid = gidIndex < 0 ? 0 : gidIndex;  // auto: GID 0 (NCCL searches for a RoCEv2 IPv4 GID; braid does not)
  if (gIbv->queryGid(d.ctx, static_cast<uint8_t>(d.port), useGid, &gid) != 0) {
    return systemError("NET/IB : ibv_query_gid(%s port %d, NCCL_IB_GID_INDEX=%d) failed", d.name.c_str(), d.port,
                       useGid);
  }
  std::random_device rnd;
  c.local = QpInfo{kHandleMagic,
                   c.qp->qp_num,
                   rnd() & 0xffffff,
                   d.portAttr.lid,
                   static_cast<uint8_t>(d.portAttr.active_mtu),
                   d.portAttr.link_layer,
                   {}};
  memcpy(c.local.gid, gid.raw, 16);
  return Status::ok();
}

// INIT -> RTR -> RTS with the peer's info.
Status connectQp(Comm& c) {
  if (c.remote.magic != kHandleMagic) return remoteError("NET/IB : peer %s sent a bad QP description", c.peer.c_str());
  int timeout = 0, retry = 0, gidIndex = 0;
  BRAID_RETURN_IF_ERROR(checkKnobs(&timeout, &retry, &gidIndex));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(c.local.mtu, c.remote.mtu));
  a.dest_qp_num = c.remote.qpn;
  a.rq_psn = c.remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(c.dev->port);
  if (c.local.linkLayer == IBV_LINK_LAYER_ETHERNET || gidIndex >= 0) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, c.remote.gid, 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gidIndex < 0 ? 0 : gidIndex);
    a.ah_attr.grh.hop_limit = 255;
  } else {
    a.ah_attr.dlid = c.remote.lid;
  }
  int rc = gIbv->modifyQp(c.qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) return errnoError(rc, "NET/IB : ibv_modify_qp(RTR) to peer %s", c.peer.c_str());
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.sq_psn = c.local.psn;
  s.timeout = static_cast<uint8_t>(timeout);
  s.retry_cnt = static_cast<uint8_t>(retry);
  s.rnr_retry = 7;  // infinite: a send waits for its receive to be posted
  s.max_rd_atomic = 1;
  rc = gIbv->modifyQp(
      c.qp, &s,
      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return errnoError(rc, "NET/IB : ibv_modify_qp(RTS) to peer %s", c.peer.c_str());
  return Status::ok();
}

// Moves `want` bytes of buf over fd without blocking; *done counts progress. false: peer closed.
Status ioSome(Comm& c, bool send, void* buf, size_t want, size_t* done) {
  while (*done < want) {
    char* p = static_cast<char*>(buf) + *done;
    ssize_t n =
        send ? ::send(c.fd, p, want - *done, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(c.fd, p, want - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return remoteError("NET/IB : peer %s closed the connection during setup", c.peer.c_str());
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::ok();
    return errnoError(errno, "NET/IB : side channel to %s", c.peer.c_str());
  }
  return Status::ok();
}

// ---- ABI ----

ncclResult_t ibInit(ncclDebugLogger_t logFn) {
  initBuiltin(logFn);
  std::lock_guard<std::mutex> lk(gMu);
  if (gInitDone) return ncclSuccess;
  gInitDone = true;
  Result<IbHcaSpec> spec = parseIbHca(params::IbHca());
  if (!spec.isOk()) return BRAID_NET_RESULT(spec.status());
  // No libibverbs means no IB devices, not an error: the loader falls back, and NCCL_NET=IB says why.
  gIbv = libraryOrNoDevices(loadIbvLib(), "IB");
  if (gIbv == nullptr) return ncclSuccess;
  const IbvLib& lib = *gIbv;
  int n = 0;
  ibv_device** list = lib.getDeviceList(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) lib.freeDeviceList(list);
    return ncclSuccess;  // zero devices; the loader logs "NET/IB : No device found."
  }
  for (int i = 0; i < n; ++i) {
    ibv_context* ctx = lib.openDevice(list[i]);
    if (ctx == nullptr) continue;
    ibv_device_attr attr{};
    bool used = false;
    if (lib.queryDevice(ctx, &attr) == 0) {
      for (int port = 1; port <= attr.phys_port_cnt; ++port) {
        ibv_port_attr pa{};
        if (queryPort(lib, ctx, static_cast<uint8_t>(port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
        std::string name = lib.getDeviceName(list[i]);
        if (!matchIbHca(spec.value(), name, port)) continue;
        Device d;
        d.name = name;
        d.port = port;
        d.ctx = ctx;
        d.pd = lib.allocPd(ctx);
        if (d.pd == nullptr) continue;
        d.portAttr = pa;
        d.guid = lib.getDeviceGuid(list[i]);
        d.speedMbps = rateMbps(pa);
        d.maxQp = attr.max_qp;
        char real[PATH_MAX];
        std::string sys = "/sys/class/infiniband/" + name + "/device";
        if (realpath(sys.c_str(), real) != nullptr) d.pciPath = real;
        gDevices.push_back(d);
        used = true;
      }
    }
    if (!used) lib.closeDevice(ctx);
  }
  lib.freeDeviceList(list);
  for (const Device& d : gDevices) {
    BRAID_NET_INFO("NET/IB : Using %s:%d (%s, %d Mbps)", d.name.c_str(), d.port,
                   d.portAttr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", d.speedMbps);
  }
  return ncclSuccess;
}

ncclResult_t ibDevices(int* ndev) {
  if (ndev == nullptr) return BRAID_NET_RESULT(invalidArgument("NET/IB : devices: ndev is null"));
  std::lock_guard<std::mutex> lk(gMu);
  *ndev = static_cast<int>(gDevices.size());
  return ncclSuccess;
}

ncclResult_t ibGetProperties(int dev, ncclNetProperties_v8_t* props) {
  std::lock_guard<std::mutex> lk(gMu);
  if (props == nullptr || dev < 0 || dev >= static_cast<int>(gDevices.size())) {
    return BRAID_NET_RESULT(
        invalidArgument("NET/IB : getProperties: device %d does not exist (%zu devices)", dev, gDevices.size()));
  }
  Device& d = gDevices[dev];
  *props = ncclNetProperties_v8_t{};
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  props->guid = d.guid;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 1;  // memory regions belong to the device's protection domain
  props->speed = d.speedMbps;
  props->port = d.port;
  props->maxComms = d.maxQp;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

Device* deviceAt(int dev) {
  std::lock_guard<std::mutex> lk(gMu);
  if (dev < 0 || dev >= static_cast<int>(gDevices.size())) return nullptr;
  return &gDevices[dev];
}

ncclResult_t ibListen(int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr || deviceAt(dev) == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/IB : listen: bad arguments (device %d)", dev));
  }
  Result<SocketAddress> addr = findBootstrapInterface(nullptr);
  if (!addr.isOk()) return BRAID_NET_RESULT(addr.status());
  SocketAddress bound;
  Result<Socket> sock = Socket::listen(addr.value(), &bound);
  if (!sock.isOk()) return BRAID_NET_RESULT(sock.status());
  auto* lc = new ListenComm();
  lc->dev = dev;
  lc->fd = ::dup(sock.value().fd());
  fcntl(lc->fd, F_SETFL, fcntl(lc->fd, F_GETFL) | O_NONBLOCK);
  fcntl(lc->fd, F_SETFD, FD_CLOEXEC);
  auto* h = static_cast<Handle*>(handle);
  memset(h, 0, sizeof(*h));
  h->magic = kHandleMagic;
  memcpy(&h->addr, &bound.storage, std::min<size_t>(bound.len, sizeof(h->addr)));
  *listenComm = lc;
  return ncclSuccess;
}

Status connectStep(int dev, Handle* h, void** sendComm) {
  if (h->magic != kHandleMagic) return invalidArgument("NET/IB : connect: the handle is not an IB listen handle");
  Comm* c = nullptr;
  if (h->pending != nullptr) {
    std::lock_guard<std::mutex> lk(gPendingMu);
    if (gPending.count(h->pending) == 0) return invalidArgument("NET/IB : connect: unknown pending state in handle");
    c = static_cast<Comm*>(h->pending);
  } else {
    Device* d = deviceAt(dev);
    if (d == nullptr) return invalidArgument("NET/IB : connect: device %d does not exist", dev);
    auto owned = std::make_unique<Comm>();
    owned->isSend = true;
    owned->dev = d;
    SocketAddress a;
    a.len = h->addr.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    memcpy(&a.storage, &h->addr, a.len);
    owned->peer = a.toString();
    owned->wait = WaitContext::withTimeout(nullptr, builtinTimeoutSec().load());
    BRAID_RETURN_IF_ERROR(createQp(*owned));
    owned->fd = ::socket(a.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (owned->fd < 0) return errnoError(errno, "NET/IB : socket() for %s", owned->peer.c_str());
    if (::connect(owned->fd, reinterpret_cast<sockaddr*>(&a.storage), a.len) != 0 && errno != EINPROGRESS) {
      return errnoError(errno, "NET/IB : connect() to %s", owned->peer.c_str());
    }
    c = owned.release();
    std::lock_guard<std::mutex> lk(gPendingMu);
    gPending.insert(c);
    h->pending = c;
  }
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lk(gPendingMu);
    gPending.erase(c);
    h->pending = nullptr;
    delete c;
    return s;
  };
  if (!c->tcpConnected) {
    pollfd pf{c->fd, POLLOUT, 0};
    if (::poll(&pf, 1, 0) > 0) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return fail(errnoError(err, "NET/IB : connecting to %s", c->peer.c_str()));
      c->tcpConnected = true;
    }
  }
  if (c->tcpConnected) {
    Status s = ioSome(*c, true, &c->local, sizeof(QpInfo), &c->infoSent);
    if (s.isOk()) s = ioSome(*c, false, &c->remote, sizeof(QpInfo), &c->infoGot);
    if (!s.isOk()) return fail(s);
    if (c->infoGot == sizeof(QpInfo)) {
      s = connectQp(*c);
      if (!s.isOk()) return fail(s);
      std::lock_guard<std::mutex> lk(gPendingMu);
      gPending.erase(c);
      h->pending = nullptr;
      *sendComm = c;
      return Status::ok();
    }
  }
  if (c->wait.expired()) return fail(remoteError("NET/IB : no answer from %s within BRAID_TIMEOUT", c->peer.c_str()));
  return Status::ok();
}

ncclResult_t ibConnect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t**) {
  if (handle == nullptr || sendComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/IB : connect: handle or sendComm is null"));
  }
  *sendComm = nullptr;
  return BRAID_NET_RESULT(connectStep(dev, static_cast<Handle*>(handle), sendComm));
}

Status acceptStep(ListenComm* lc, void** recvComm) {
  int fd = ::accept4(lc->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    auto c = std::make_unique<Comm>();
    c->dev = deviceAt(lc->dev);
    c->fd = fd;
    SocketAddress a;
    a.len = sizeof(a.storage);
    getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len);
    c->peer = a.toString();
    BRAID_RETURN_IF_ERROR(createQp(*c));
    lc->pending.push_back(c.release());
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return errnoError(errno, "NET/IB : accept() on the side channel");
  }
  for (size_t i = 0; i < lc->pending.size(); ++i) {
    Comm* c = lc->pending[i];
    Status s = ioSome(*c, false, &c->remote, sizeof(QpInfo), &c->infoGot);
    if (s.isOk() && c->infoGot == sizeof(QpInfo) && !c->qpReady) {
      s = connectQp(*c);  // RTR before we answer: the sender may post as soon as it has our info
      c->qpReady = s.isOk();
    }
    if (s.isOk() && c->infoGot == sizeof(QpInfo)) s = ioSome(*c, true, &c->local, sizeof(QpInfo), &c->infoSent);
    if (!s.isOk()) {
      delete c;
      lc->pending.erase(lc->pending.begin() + static_cast<long>(i));
      return s;
    }
    if (c->infoSent == sizeof(QpInfo)) {
      lc->pending.erase(lc->pending.begin() + static_cast<long>(i));
      *recvComm = c;
      return Status::ok();
    }
  }
  return Status::ok();
}

ncclResult_t ibAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t**) {
  if (listenComm == nullptr || recvComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/IB : accept: listenComm or recvComm is null"));
  }
  *recvComm = nullptr;
  return BRAID_NET_RESULT(acceptStep(static_cast<ListenComm*>(listenComm), recvComm));
}

ncclResult_t ibRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return BRAID_NET_RESULT(invalidArgument("NET/IB : regMr: null argument"));
  if (type != NCCL_PTR_HOST) {
    return BRAID_NET_RESULT(
        invalidArgument("NET/IB : regMr: memory type %d is not supported (host memory only)", type));
  }
  Comm* c = static_cast<Comm*>(comm);
  ibv_mr* mr =
      gIbv->regMr(c->dev->pd, data, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (mr == nullptr) return BRAID_NET_RESULT(errnoError(errno, "NET/IB : ibv_reg_mr of %zu bytes", size));
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t ibRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return BRAID_NET_RESULT(invalidArgument("NET/IB : regMrDmaBuf: null"));
  Comm* c = static_cast<Comm*>(comm);
  if (gIbv->regDmabufMr == nullptr) {
    return BRAID_NET_RESULT(internalError(
        "NET/IB : regMrDmaBuf: %s has no ibv_reg_dmabuf_mr (rdma-core 34 or later needed)", gIbv->name.c_str()));
  }
  ibv_mr* mr = gIbv->regDmabufMr(c->dev->pd, offset, size, reinterpret_cast<uint64_t>(data), fd,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (mr == nullptr) return BRAID_NET_RESULT(errnoError(errno, "NET/IB : ibv_reg_dmabuf_mr of %zu bytes", size));
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t ibDeregMr(void*, void* mhandle) {
  if (mhandle != nullptr) gIbv->deregMr(static_cast<ibv_mr*>(mhandle));
  return ncclSuccess;
}

// Request handles are (comm, slot) packed as a pointer to the slot.
struct ReqRef {
  Comm* comm;
  int slot;
};

int freeSlot(Comm& c) {
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) {
    if (!c.reqs[i].used) return i;
  }
  return -1;
}

ncclResult_t ibIsend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  if (sendComm == nullptr || request == nullptr || size < 0) {
    return BRAID_NET_RESULT(invalidArgument("NET/IB : isend: bad arguments (size %d)", size));
  }
  *request = nullptr;
  Comm& c = *static_cast<Comm*>(sendComm);
  if (!c.connError.isOk()) return BRAID_NET_RESULT(c.connError);
  if (size > 0 && mhandle == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/IB : isend: %d bytes without a registered memory handle", size));
  }
  int slot = freeSlot(c);
  if (slot < 0) return ncclSuccess;
  ibv_sge sge{reinterpret_cast<uint64_t>(data), static_cast<uint32_t>(size),
              mhandle != nullptr ? static_cast<ibv_mr*>(mhandle)->lkey : 0};
  ibv_send_wr wr{};
  wr.wr_id = static_cast<uint64_t>(slot);
  wr.sg_list = size > 0 ? &sge : nullptr;
  wr.num_sge = size > 0 ? 1 : 0;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<uint32_t>(tag));
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(c.qp, &wr, &bad);
  if (rc != 0) return BRAID_NET_RESULT(errnoError(rc, "NET/IB : ibv_post_send to %s", c.peer.c_str()));
  c.reqs[slot] = Comm::Req{true, false, tag, static_cast<size_t>(size), Status::ok()};
  *request = new ReqRef{&c, slot};
  return ncclSuccess;
}

ncclResult_t ibIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (recvComm == nullptr || request == nullptr || data == nullptr || sizes == nullptr || tags == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/IB : irecv: null argument"));
  }
  *request = nullptr;
  if (n != 1) return BRAID_NET_RESULT(invalidArgument("NET/IB : irecv: n=%d (this IB network accepts 1)", n));
  Comm& c = *static_cast<Comm*>(recvComm);
  if (!c.connError.isOk()) return BRAID_NET_RESULT(c.connError);
  int slot = freeSlot(c);
  if (slot < 0) return ncclSuccess;
  ibv_mr* mr = mhandles != nullptr ? static_cast<ibv_mr*>(mhandles[0]) : nullptr;
  if (sizes[0] > 0 && mr == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/IB : irecv: %d bytes without a registered memory handle", sizes[0]));
  }
  ibv_sge sge{reinterpret_cast<uint64_t>(data[0]), static_cast<uint32_t>(sizes[0]), mr != nullptr ? mr->lkey : 0};
  ibv_recv_wr wr{};
  wr.wr_id = static_cast<uint64_t>(slot);
  wr.sg_list = sizes[0] > 0 ? &sge : nullptr;
  wr.num_sge = sizes[0] > 0 ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(c.qp, &wr, &bad);
  if (rc != 0) return BRAID_NET_RESULT(errnoError(rc, "NET/IB : ibv_post_recv from %s", c.peer.c_str()));
  c.reqs[slot] = Comm::Req{true, false, tags[0], 0, Status::ok()};
  *request = new ReqRef{&c, slot};
  return ncclSuccess;
}

ncclResult_t ibIflush(void*, int, void**, int*, void**, void** request) {
  if (request != nullptr) *request = nullptr;  // host memory only: nothing to flush
  return ncclSuccess;
}

void pollCq(Comm& c) {
  ibv_wc wc[16];
  int n = ibv_poll_cq(c.cq, 16, wc);
  for (int i = 0; i < n; ++i) {
    int slot = static_cast<int>(wc[i].wr_id);
    if (slot < 0 || slot >= NCCL_NET_MAX_REQUESTS) continue;
    Comm::Req& r = c.reqs[slot];
    r.done = true;
    if (wc[i].status != IBV_WC_SUCCESS) {
      r.error = remoteError("NET/IB : %s peer %s failed: %s (NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT bound the wait)",
                            c.isSend ? "send to" : "receive from", c.peer.c_str(), gIbv->wcStatusStr(wc[i].status));
      c.connError = r.error;
    } else if (!c.isSend) {
      r.size = wc[i].byte_len;
      uint32_t tag = ntohl(wc[i].imm_data);
      if ((wc[i].wc_flags & IBV_WC_WITH_IMM) == 0 || tag != static_cast<uint32_t>(r.tag)) {
        r.error = invalidUsage(
            "NET/IB : message from %s has tag %u but the posted receive expects %d (the IB "
            "network matches in order, not by tag)",
            c.peer.c_str(), tag, r.tag);
      }
    }
  }
  // The side channel stays open for the connection's life: EOF there means the peer closed or died.
  if (Clock::now() - c.lastPeerCheck > std::chrono::milliseconds(100)) {
    c.lastPeerCheck = Clock::now();
    char b;
    ssize_t k = ::recv(c.fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    if (k == 0 && c.connError.isOk()) {
      c.connError = remoteError("NET/IB : peer %s closed the connection", c.peer.c_str());
    }
  }
}

ncclResult_t ibTest(void* request, int* done, int* sizes) {
  if (request == nullptr || done == nullptr) return BRAID_NET_RESULT(invalidArgument("NET/IB : test: null argument"));
  *done = 0;
  auto* ref = static_cast<ReqRef*>(request);
  Comm& c = *ref->comm;
  Comm::Req& r = c.reqs[ref->slot];
  pollCq(c);
  if (!r.error.isOk() || (!r.done && !c.connError.isOk())) {
    Status e = r.error.isOk() ? c.connError : r.error;
    r.used = false;  // the QP is in error: it will not touch the buffer again
    delete ref;
    return BRAID_NET_RESULT(e);
  }
  if (!r.done) return ncclSuccess;
  if (sizes != nullptr) sizes[0] = static_cast<int>(r.size);
  r.used = false;
  delete ref;
  *done = 1;
  return ncclSuccess;
}

ncclResult_t ibCloseComm(void* comm) {
  delete static_cast<Comm*>(comm);
  return ncclSuccess;
}

ncclResult_t ibCloseListen(void* listenComm) {
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (lc == nullptr) return ncclSuccess;
  for (Comm* c : lc->pending) delete c;
  ::close(lc->fd);
  delete lc;
  return ncclSuccess;
}

ncclResult_t ibGetDeviceMr(void*, void*, void**) {
  return BRAID_NET_RESULT(internalError("NET/IB : getDeviceMr: no device offload"));
}
ncclResult_t ibIrecvConsumed(void*, int, void*) {
  return ncclSuccess;
}

const ncclNet_v8_t kIbNet = {
    "IB",        ibInit,        ibDevices,     ibGetProperties, ibListen,        ibConnect, ibAccept,
    ibRegMr,     ibRegMrDmaBuf, ibDeregMr,     ibIsend,         ibIrecv,         ibIflush,  ibTest,
    ibCloseComm, ibCloseComm,   ibCloseListen, ibGetDeviceMr,   ibIrecvConsumed,
};

}  // namespace
}  // namespace ib

const ncclNet_v8_t* ibNetTable() {
  return &ib::kIbNet;
}

}  // namespace net
}  // namespace braid
