#include "transports/net/net_plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "src/common/dyn_lib.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "src/common/tls.h"
#include "transports/net/net_common.h"

namespace braid {
namespace net {

namespace {

thread_local std::string tLastNetWarn;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const char* resultName(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "unknown ncclResult_t";
  }
}

Code codeOf(ncclResult_t rc) {
  int v = static_cast<int>(rc);
  if (v >= 1 && v <= 7) return static_cast<Code>(v);
  return Code::kInternalError;
}

}  // namespace

void netLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  auto lvl = static_cast<LogLevel>(level);
  bool keep = level == NCCL_LOG_WARN;
  if (!keep && !logEnabled(lvl, flags)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (keep) tLastNetWarn = buf;
  logMessage(lvl, flags, file != nullptr ? file : "net", line, "%s", buf);
}

// A dlopen handle, closed when the last module from it goes away.
class PluginLibrary {
 public:
  PluginLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~PluginLibrary() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

std::unique_ptr<NetModule> NetModule::wrapV8(const ncclNet_v8_t* table, std::shared_ptr<PluginLibrary> lib) {
  std::unique_ptr<NetModule> m(new NetModule());
  m->v8_ = table;
  m->version_ = 8;
  m->name_ = table->name != nullptr ? table->name : "?";
  m->lib_ = std::move(lib);
  return m;
}

std::unique_ptr<NetModule> NetModule::wrapV9(const ncclNet_v9_t* table, std::shared_ptr<PluginLibrary> lib) {
  std::unique_ptr<NetModule> m(new NetModule());
  m->v9_ = table;
  m->version_ = 9;
  m->name_ = table->name != nullptr ? table->name : "?";
  m->lib_ = std::move(lib);
  return m;
}

std::unique_ptr<NetModule> NetModule::wrapV10(const ncclNet_v10_t* table, std::shared_ptr<PluginLibrary> lib) {
  std::unique_ptr<NetModule> m(new NetModule());
  m->v10_ = table;
  m->version_ = 10;
  m->name_ = table->name != nullptr ? table->name : "?";
  m->lib_ = std::move(lib);
  return m;
}

std::unique_ptr<NetModule> NetModule::wrapV11(const ncclNet_v11_t* table, std::shared_ptr<PluginLibrary> lib) {
  static_assert(sizeof(ncclNet_v11_t) == sizeof(ncclNet_v12_t), "v11 and v12 tables have the same members");
  std::unique_ptr<NetModule> m(new NetModule());
  m->v11_ = table;
  // The same pointers in the same order; the struct types they take differ only for getProperties (called through
  // v11_) and makeVDevice (not called). NCCL 2.30 reads v11 tables the same way.
  m->v12_ = reinterpret_cast<const ncclNet_v12_t*>(table);
  m->version_ = 11;
  m->name_ = table->name != nullptr ? table->name : "?";
  m->lib_ = std::move(lib);
  return m;
}

std::unique_ptr<NetModule> NetModule::wrapV12(const ncclNet_v12_t* table, std::shared_ptr<PluginLibrary> lib) {
  std::unique_ptr<NetModule> m(new NetModule());
  m->v12_ = table;
  m->version_ = 12;
  m->name_ = table->name != nullptr ? table->name : "?";
  m->lib_ = std::move(lib);
  return m;
}

NetModule::~NetModule() = default;

NetContext::~NetContext() {
  if (ctx_ == nullptr || net_->v12_ == nullptr) return;
  tLastNetWarn.clear();
  const Status st = net_->check(net_->v12_->finalize(ctx_), "finalize");
  if (!st.isOk()) BRAID_WARN("%s", st.message().c_str());
}

std::string NetModule::origin() const {
  return lib_ == nullptr ? std::string("built-in") : lib_->path();
}

Status NetModule::check(ncclResult_t rc, const char* what) const {
  if (rc == ncclSuccess) return Status::ok();
  std::string why = tLastNetWarn.empty() ? std::string("no detail logged by the network") : tLastNetWarn;
  tLastNetWarn.clear();
  return Status(codeOf(rc), strPrintf("NET/%s : %s failed (%s): %s", name_.c_str(), what, resultName(rc), why.c_str()));
}

// Each wrapper clears the thread's last WARN first, so a failure reports its own cause, not an older one.
#define BRAID_NET_CALL(what, call) \
  do {                             \
    tLastNetWarn.clear();          \
    return check((call), what);    \
  } while (0)

Status NetModule::init() {
  if (v12_ != nullptr) {
    if (v12_->finalize == nullptr) {
      return invalidArgument("NET/%s : a v%d plugin must provide finalize (it is NULL)", name_.c_str(), version_);
    }
    ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    BRAID_NET_CALL("init", v12_->init(&processCtx_, 0, &config, netLogger, nullptr));
  }
  if (v10_ != nullptr) BRAID_NET_CALL("init", v10_->init(netLogger, nullptr));
  if (v9_ != nullptr) BRAID_NET_CALL("init", v9_->init(netLogger));
  BRAID_NET_CALL("init", v8_->init(netLogger));
}

Result<int> NetModule::devices() {
  int n = 0;
  tLastNetWarn.clear();
  ncclResult_t rc = v12_ != nullptr   ? v12_->devices(&n)
                    : v10_ != nullptr ? v10_->devices(&n)
                    : v9_ != nullptr  ? v9_->devices(&n)
                                      : v8_->devices(&n);
  BRAID_RETURN_IF_ERROR(check(rc, "devices"));
  if (n < 0) return internalError("NET/%s : devices() reported %d devices", name_.c_str(), n);
  return n;
}

namespace {
template <typename P>
void copyCommon(const P& p, NetProperties* out) {
  out->name = p.name != nullptr ? p.name : "";
  out->pciPath = p.pciPath != nullptr ? p.pciPath : "";
  out->guid = p.guid;
  out->ptrSupport = p.ptrSupport;
  out->regIsGlobal = p.regIsGlobal != 0;
  out->speedMbps = p.speed;
  out->port = p.port;
  out->latencyUs = p.latency;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
  out->netDeviceType = p.netDeviceType;
  out->netDeviceVersion = p.netDeviceVersion;
}
}  // namespace

Result<NetProperties> NetModule::getProperties(int dev) {
  NetProperties out;
  tLastNetWarn.clear();
  if (v11_ != nullptr) {
    ncclNetProperties_v11_t p{};
    BRAID_RETURN_IF_ERROR(check(v11_->getProperties(dev, &p), "getProperties"));
    copyCommon(p, &out);
    out.forceFlush = p.forceFlush != 0;
    out.maxP2pBytes = p.maxP2pBytes;
  } else if (v12_ != nullptr) {
    ncclNetProperties_v12_t p{};
    p.railId = p.planeId = NCCL_NET_ID_UNDEF;
    BRAID_RETURN_IF_ERROR(check(v12_->getProperties(dev, &p), "getProperties"));
    copyCommon(p, &out);
    out.forceFlush = p.forceFlush != 0;
    out.maxP2pBytes = p.maxP2pBytes;
    out.railId = p.railId;
    out.planeId = p.planeId;
  } else if (v10_ != nullptr) {
    ncclNetProperties_v10_t p{};
    BRAID_RETURN_IF_ERROR(check(v10_->getProperties(dev, &p), "getProperties"));
    copyCommon(p, &out);
    out.forceFlush = p.forceFlush != 0;
    out.maxP2pBytes = p.maxP2pBytes;
  } else if (v9_ != nullptr) {
    ncclNetProperties_v9_t p{};
    BRAID_RETURN_IF_ERROR(check(v9_->getProperties(dev, &p), "getProperties"));
    copyCommon(p, &out);
    out.forceFlush = p.forceFlush != 0;
    out.maxP2pBytes = p.maxP2pBytes;
  } else {
    ncclNetProperties_v8_t p{};
    BRAID_RETURN_IF_ERROR(check(v8_->getProperties(dev, &p), "getProperties"));
    copyCommon(p, &out);
    out.maxP2pBytes = INT_MAX;
  }
  if (out.maxRecvs < 1) out.maxRecvs = 1;
  return out;
}

Result<std::shared_ptr<NetContext>> NetModule::openContext(uint64_t commId, int trafficClass,
                                                           const NetCommHints& hints) {
  if (v12_ == nullptr) return std::shared_ptr<NetContext>(new NetContext(this, nullptr, commId, trafficClass));
  ncclNetCommConfig_v12_t config{trafficClass};
  void* ctx = nullptr;
  tLastNetWarn.clear();
  BRAID_RETURN_IF_ERROR(check(v12_->init(&ctx, commId, &config, netLogger, nullptr), "init"));
  auto context = std::shared_ptr<NetContext>(new NetContext(this, ctx, commId, trafficClass));
  if (v12_->setNetAttr != nullptr) {
    // What a ring or tree rank does: up to 4 peers at once (a tree's parent and children in both trees), one
    // connection per channel to each; any collective, algorithm and protocol.
    ncclNetAttr_v12_t attr = NCCL_NET_ATTR_INIT;
    const int peers = std::max(1, std::min(hints.nranks - 1, 4));
    for (ncclNetCommAttr_v12_t* side : {&attr.sendCommAttr, &attr.recvCommAttr}) {
      side->minConcurrentPeers = 1;
      side->maxConcurrentPeers = peers;
      side->minFlowsPerPeer = 1;
      side->maxFlowsPerPeer = std::max(1, hints.nChannels);
    }
    tLastNetWarn.clear();
    const Status st = check(v12_->setNetAttr(ctx, &attr), "setNetAttr");
    if (!st.isOk()) BRAID_INFO(kLogInit | kLogNet, "%s (ignored, as NCCL does)", st.message().c_str());
  }
  BRAID_INFO(kLogInit | kLogNet, "NET/%s : context %p for comm 0x%llx (traffic class %d)", name_.c_str(), ctx,
             static_cast<unsigned long long>(commId), trafficClass);
  return context;
}

Status NetModule::listen(const NetContext* ctx, int dev, NetHandle* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return invalidArgument("NET/%s : listen: null handle", name_.c_str());
  handle->fill(0);
  *listenComm = nullptr;
  if (v12_ != nullptr) {
    BRAID_NET_CALL("listen", v12_->listen(ctx != nullptr ? ctx->ctx() : processCtx_, dev, handle->data(), listenComm));
  }
  if (v10_ != nullptr) BRAID_NET_CALL("listen", v10_->listen(dev, handle->data(), listenComm));
  if (v9_ != nullptr) BRAID_NET_CALL("listen", v9_->listen(dev, handle->data(), listenComm));
  BRAID_NET_CALL("listen", v8_->listen(dev, handle->data(), listenComm));
}

Status NetModule::connect(const NetContext* ctx, int dev, NetHandle* handle, void** sendComm) {
  if (handle == nullptr || sendComm == nullptr) {
    return invalidArgument("NET/%s : connect: null handle or sendComm", name_.c_str());
  }
  *sendComm = nullptr;
  if (v12_ != nullptr) {
    BRAID_NET_CALL("connect",
                   v12_->connect(ctx != nullptr ? ctx->ctx() : processCtx_, dev, handle->data(), sendComm, nullptr));
  }
  if (v10_ != nullptr) {
    ncclNetCommConfig_v10_t config{ctx != nullptr ? ctx->trafficClass() : NCCL_NET_TRAFFIC_CLASS_UNDEF};
    BRAID_NET_CALL("connect", v10_->connect(dev, &config, handle->data(), sendComm, nullptr));
  }
  if (v9_ != nullptr) BRAID_NET_CALL("connect", v9_->connect(dev, handle->data(), sendComm, nullptr));
  BRAID_NET_CALL("connect", v8_->connect(dev, handle->data(), sendComm, nullptr));
}

Status NetModule::accept(void* listenComm, void** recvComm) {
  if (listenComm == nullptr || recvComm == nullptr) {
    return invalidArgument("NET/%s : accept: null listenComm or recvComm", name_.c_str());
  }
  *recvComm = nullptr;
  if (v12_ != nullptr) BRAID_NET_CALL("accept", v12_->accept(listenComm, recvComm, nullptr));
  if (v10_ != nullptr) BRAID_NET_CALL("accept", v10_->accept(listenComm, recvComm, nullptr));
  if (v9_ != nullptr) BRAID_NET_CALL("accept", v9_->accept(listenComm, recvComm, nullptr));
  BRAID_NET_CALL("accept", v8_->accept(listenComm, recvComm, nullptr));
}

Status NetModule::regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (v12_ != nullptr) BRAID_NET_CALL("regMr", v12_->regMr(comm, data, size, type, mhandle));
  if (v10_ != nullptr) BRAID_NET_CALL("regMr", v10_->regMr(comm, data, size, type, mhandle));
  if (v9_ != nullptr) BRAID_NET_CALL("regMr", v9_->regMr(comm, data, size, type, mhandle));
  BRAID_NET_CALL("regMr", v8_->regMr(comm, data, size, type, mhandle));
}

Status NetModule::regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  if (v12_ != nullptr) {
    if (v12_->regMrDmaBuf == nullptr) return internalError("NET/%s : no regMrDmaBuf", name_.c_str());
    BRAID_NET_CALL("regMrDmaBuf", v12_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle));
  }
  if (v10_ != nullptr) {
    if (v10_->regMrDmaBuf == nullptr) return internalError("NET/%s : no regMrDmaBuf", name_.c_str());
    BRAID_NET_CALL("regMrDmaBuf", v10_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle));
  }
  if (v9_ != nullptr) {
    if (v9_->regMrDmaBuf == nullptr) return internalError("NET/%s : no regMrDmaBuf", name_.c_str());
    BRAID_NET_CALL("regMrDmaBuf", v9_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle));
  }
  if (v8_->regMrDmaBuf == nullptr) return internalError("NET/%s : no regMrDmaBuf", name_.c_str());
  BRAID_NET_CALL("regMrDmaBuf", v8_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle));
}

Status NetModule::deregMr(void* comm, void* mhandle) {
  if (v12_ != nullptr) BRAID_NET_CALL("deregMr", v12_->deregMr(comm, mhandle));
  if (v10_ != nullptr) BRAID_NET_CALL("deregMr", v10_->deregMr(comm, mhandle));
  if (v9_ != nullptr) BRAID_NET_CALL("deregMr", v9_->deregMr(comm, mhandle));
  BRAID_NET_CALL("deregMr", v8_->deregMr(comm, mhandle));
}

Status NetModule::isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  if (request == nullptr) return invalidArgument("NET/%s : isend: null request pointer", name_.c_str());
  *request = nullptr;
  if (v12_ != nullptr) BRAID_NET_CALL("isend", v12_->isend(sendComm, data, size, tag, mhandle, nullptr, request));
  if (v10_ != nullptr) BRAID_NET_CALL("isend", v10_->isend(sendComm, data, size, tag, mhandle, nullptr, request));
  if (v9_ != nullptr) BRAID_NET_CALL("isend", v9_->isend(sendComm, data, size, tag, mhandle, request));
  if (size > static_cast<size_t>(INT_MAX)) {
    return invalidArgument("NET/%s : isend of %zu bytes exceeds the v8 ABI's INT_MAX limit", name_.c_str(), size);
  }
  BRAID_NET_CALL("isend", v8_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request));
}

Status NetModule::irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                        void** request) {
  if (request == nullptr) return invalidArgument("NET/%s : irecv: null request pointer", name_.c_str());
  *request = nullptr;
  if (n < 1 || n > 8) return invalidArgument("NET/%s : irecv: n=%d receives (must be 1..8)", name_.c_str(), n);
  int tagsCopy[8];
  size_t sizesCopy[8];
  int intSizes[8];
  for (int i = 0; i < n; ++i) {
    tagsCopy[i] = tags[i];
    sizesCopy[i] = sizes[i];
    intSizes[i] = static_cast<int>(std::min<size_t>(sizes[i], INT_MAX));
  }
  if (v12_ != nullptr) {
    void* phandles[8] = {};
    BRAID_NET_CALL("irecv", v12_->irecv(recvComm, n, data, sizesCopy, tagsCopy, mhandles, phandles, request));
  }
  if (v10_ != nullptr) {
    void* phandles[8] = {};
    BRAID_NET_CALL("irecv", v10_->irecv(recvComm, n, data, sizesCopy, tagsCopy, mhandles, phandles, request));
  }
  if (v9_ != nullptr) BRAID_NET_CALL("irecv", v9_->irecv(recvComm, n, data, sizesCopy, tagsCopy, mhandles, request));
  BRAID_NET_CALL("irecv", v8_->irecv(recvComm, n, data, intSizes, tagsCopy, mhandles, request));
}

Status NetModule::iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles, void** request) {
  if (request == nullptr) return invalidArgument("NET/%s : iflush: null request pointer", name_.c_str());
  *request = nullptr;
  int sizesCopy[8];
  if (n < 1 || n > 8) return invalidArgument("NET/%s : iflush: n=%d (must be 1..8)", name_.c_str(), n);
  for (int i = 0; i < n; ++i) sizesCopy[i] = sizes[i];
  if (v12_ != nullptr) BRAID_NET_CALL("iflush", v12_->iflush(recvComm, n, data, sizesCopy, mhandles, request));
  if (v10_ != nullptr) BRAID_NET_CALL("iflush", v10_->iflush(recvComm, n, data, sizesCopy, mhandles, request));
  if (v9_ != nullptr) BRAID_NET_CALL("iflush", v9_->iflush(recvComm, n, data, sizesCopy, mhandles, request));
  BRAID_NET_CALL("iflush", v8_->iflush(recvComm, n, data, sizesCopy, mhandles, request));
}

Status NetModule::test(void* request, bool* done, int* sizes) {
  if (done == nullptr) return invalidArgument("NET/%s : test: null done pointer", name_.c_str());
  int d = 0;
  tLastNetWarn.clear();
  ncclResult_t rc = v12_ != nullptr   ? v12_->test(request, &d, sizes)
                    : v10_ != nullptr ? v10_->test(request, &d, sizes)
                    : v9_ != nullptr  ? v9_->test(request, &d, sizes)
                                      : v8_->test(request, &d, sizes);
  *done = d != 0;
  return check(rc, "test");
}

Status NetModule::closeSend(void* comm) {
  if (v12_ != nullptr) BRAID_NET_CALL("closeSend", v12_->closeSend(comm));
  if (v10_ != nullptr) BRAID_NET_CALL("closeSend", v10_->closeSend(comm));
  if (v9_ != nullptr) BRAID_NET_CALL("closeSend", v9_->closeSend(comm));
  BRAID_NET_CALL("closeSend", v8_->closeSend(comm));
}

Status NetModule::closeRecv(void* comm) {
  if (v12_ != nullptr) BRAID_NET_CALL("closeRecv", v12_->closeRecv(comm));
  if (v10_ != nullptr) BRAID_NET_CALL("closeRecv", v10_->closeRecv(comm));
  if (v9_ != nullptr) BRAID_NET_CALL("closeRecv", v9_->closeRecv(comm));
  BRAID_NET_CALL("closeRecv", v8_->closeRecv(comm));
}

Status NetModule::closeListen(void* comm) {
  if (v12_ != nullptr) BRAID_NET_CALL("closeListen", v12_->closeListen(comm));
  if (v10_ != nullptr) BRAID_NET_CALL("closeListen", v10_->closeListen(comm));
  if (v9_ != nullptr) BRAID_NET_CALL("closeListen", v9_->closeListen(comm));
  BRAID_NET_CALL("closeListen", v8_->closeListen(comm));
}

#undef BRAID_NET_CALL

// ---- loading -------------------------------------------------------------------------------------------------

Result<std::unique_ptr<NetModule>> loadNetPlugin(const std::string& spec) {
  if (spec == "none") {
    BRAID_INFO(kLogInit | kLogNet, "NET/Plugin : NCCL_NET_PLUGIN=none, no external network plugin loaded.");
    return std::unique_ptr<NetModule>();
  }
  std::string path;
  std::string failures;
  void* handle = openPluginLibrary(pluginCandidates("nccl-net", spec), &path, &failures);
  if (handle == nullptr) {
    if (spec.empty()) {
      BRAID_INFO(kLogInit | kLogNet, "NET/Plugin : No plugin found (%s), using internal network plugins.",
                 failures.c_str());
    } else {
      BRAID_WARN("NET/Plugin : NCCL_NET_PLUGIN=%s could not be loaded (%s); using internal network plugins.",
                 spec.c_str(), failures.c_str());
    }
    return std::unique_ptr<NetModule>();
  }
  auto lib = std::make_shared<PluginLibrary>(handle, path);
  if (void* sym = dlsym(handle, "ncclNetPlugin_v12")) {
    BRAID_INFO(kLogInit | kLogNet, "NET/Plugin : Loaded %s (ncclNetPlugin_v12)", path.c_str());
    return NetModule::wrapV12(static_cast<const ncclNet_v12_t*>(sym), lib);
  }
  if (void* sym = dlsym(handle, "ncclNetPlugin_v11")) {
    BRAID_INFO(kLogInit | kLogNet, "NET/Plugin : Loaded %s (ncclNetPlugin_v11)", path.c_str());
    return NetModule::wrapV11(static_cast<const ncclNet_v11_t*>(sym), lib);
  }
  if (void* sym = dlsym(handle, "ncclNetPlugin_v10")) {
    BRAID_INFO(kLogInit | kLogNet, "NET/Plugin : Loaded %s (ncclNetPlugin_v10)", path.c_str());
    return NetModule::wrapV10(static_cast<const ncclNet_v10_t*>(sym), lib);
  }
  if (void* sym = dlsym(handle, "ncclNetPlugin_v9")) {
    BRAID_INFO(kLogInit | kLogNet, "NET/Plugin : Loaded %s (ncclNetPlugin_v9)", path.c_str());
    return NetModule::wrapV9(static_cast<const ncclNet_v9_t*>(sym), lib);
  }
  if (void* sym = dlsym(handle, "ncclNetPlugin_v8")) {
    BRAID_INFO(kLogInit | kLogNet, "NET/Plugin : Loaded %s (ncclNetPlugin_v8)", path.c_str());
    return NetModule::wrapV8(static_cast<const ncclNet_v8_t*>(sym), lib);
  }
  BRAID_WARN(
      "NET/Plugin : %s exports none of ncclNetPlugin_v12 .. ncclNetPlugin_v8 (older ABIs are "
      "not supported); using internal network plugins.",
      path.c_str());
  return std::unique_ptr<NetModule>();
}

namespace {

// True for libfabric providers that run in software over the kernel's stack or shared memory (docs/networks.md).
bool isSoftwareNet(NetModule& m) {
  auto props = m.getProperties(0);
  if (!props.isOk()) return true;
  // The OFI network names devices "<provider>/<domain>"; a utility provider follows the core one after ';'
  // ("tcp;ofi_rxm/lo"): the core provider decides.
  const std::string& name = props.value().name;
  std::string core = lower(name.substr(0, std::min(name.find('/'), name.find(';'))));
  for (const char* sw : {"tcp", "udp", "shm", "sockets", "net"}) {
    if (core == sw) return true;
  }
  return false;
}

// Why a built-in network has no device, when it knows (IB and OFI without their library); empty otherwise.
std::string noDeviceReason(const NetModule& m) {
  return m.external() ? std::string() : NoDeviceReasons::get(m.name());
}

}  // namespace

Result<NetSelection> loadNetworks() {
  NetSelection sel;
  BRAID_ASSIGN_OR_RETURN(std::unique_ptr<NetModule> plugin, loadNetPlugin(params::NetPlugin()));
  std::vector<std::unique_ptr<NetModule>> candidates;
  if (plugin != nullptr) candidates.push_back(std::move(plugin));
  if (ibNetTable() != nullptr) {
    if (params::IbDisable() == 1) {
      BRAID_INFO(kLogInit | kLogNet, "NET/IB : Disabled by NCCL_IB_DISABLE=1.");
    } else {
      candidates.push_back(NetModule::wrapV8(ibNetTable(), nullptr));
    }
  }
  if (ofiNetTable() != nullptr) candidates.push_back(NetModule::wrapV8(ofiNetTable(), nullptr));
  candidates.push_back(NetModule::wrapV8(socketNetTable(), nullptr));

  std::vector<int> ndevs;
  for (auto& m : candidates) {
    Status s = m->init();
    if (!s.isOk()) {
      if (m->external()) {
        BRAID_WARN("NET/Plugin : %s: init failed, plugin not used: %s", m->origin().c_str(), s.message().c_str());
      } else {
        BRAID_INFO(kLogInit | kLogNet, "NET : network %s not usable: %s", m->name().c_str(), s.message().c_str());
      }
      continue;
    }
    Result<int> n = m->devices();
    if (!n.isOk()) {
      BRAID_INFO(kLogInit | kLogNet, "NET : network %s: %s", m->name().c_str(), n.status().message().c_str());
      continue;
    }
    if (n.value() == 0) {
      std::string why = noDeviceReason(*m);
      if (why.empty()) {
        BRAID_INFO(kLogInit | kLogNet, "NET/%s : No device found.", m->name().c_str());
      } else {
        BRAID_INFO(kLogInit | kLogNet, "NET/%s : No device found (%s).", m->name().c_str(), why.c_str());
      }
    }
    ndevs.push_back(n.value());
    sel.modules.push_back(std::move(m));
  }

  std::string names;
  for (size_t i = 0; i < sel.modules.size(); ++i) {
    if (i > 0) names += ", ";
    names += sel.modules[i]->name() + " (" + std::to_string(ndevs[i]) + " devices)";
  }

  std::string want = params::Net();
  if (!want.empty()) {
    std::string w = lower(want);
    if (w == "libfabric") w = "ofi";
    for (size_t i = 0; i < sel.modules.size(); ++i) {
      std::string n = lower(sel.modules[i]->name());
      if (n == w || (w == "ofi" && n == "libfabric")) {
        if (ndevs[i] == 0) {
          std::string why = noDeviceReason(*sel.modules[i]);
          if (!why.empty()) why = ": " + why;
          return invalidArgument("NCCL_NET=%s: network %s has no devices on this host%s (available: %s)", want.c_str(),
                                 sel.modules[i]->name().c_str(), why.c_str(), names.c_str());
        }
        sel.chosen = sel.modules[i].get();
        sel.reason = "NCCL_NET=" + want;
        break;
      }
    }
    if (sel.chosen == nullptr) {
      return invalidArgument("NCCL_NET=%s names no available network (available: %s)", want.c_str(), names.c_str());
    }
  } else {
    for (size_t i = 0; i < sel.modules.size(); ++i) {
      NetModule& m = *sel.modules[i];
      if (ndevs[i] == 0) continue;
      if (!m.external() && lower(m.name()) == "ofi" && isSoftwareNet(m)) continue;
      sel.chosen = &m;
      sel.reason = m.external() ? "external plugin" : "default order";
      break;
    }
    if (sel.chosen == nullptr) {
      return systemError("no network has a device on this host (networks: %s)", names.c_str());
    }
  }
  BRAID_INFO(kLogInit | kLogNet, "Using network %s (%s, %s; available: %s)", sel.chosen->name().c_str(),
             sel.chosen->origin().c_str(), sel.reason.c_str(), names.c_str());
  if (socketEncryptionOn() && (sel.chosen->external() || lower(sel.chosen->name()) != "socket")) {
    // As in NCCL, encryption covers the library's own TCP sockets; RDMA and plugin transports carry data as they do.
    BRAID_WARN(
        "ncclSetEncryption: the bootstrap is encrypted, but network %s (%s) is not covered by TLS and carries data "
        "between hosts unencrypted (NCCL_NET=Socket encrypts it too)",
        sel.chosen->name().c_str(), sel.chosen->origin().c_str());
  }
  return sel;
}

Result<NetSelection*> processNetworks() {
  static std::mutex mu;
  static NetSelection* selection = nullptr;  // never freed: plugins stay loaded for the process's life
  std::lock_guard<std::mutex> lk(mu);
  if (selection == nullptr) {
    BRAID_ASSIGN_OR_RETURN(NetSelection loaded, loadNetworks());
    selection = new NetSelection(std::move(loaded));
  }
  return selection;
}

#if !BRAID_HAVE_IBVERBS
const ncclNet_v8_t* ibNetTable() {
  return nullptr;
}
#endif
#if !BRAID_HAVE_LIBFABRIC
const ncclNet_v8_t* ofiNetTable() {
  return nullptr;
}
#endif

}  // namespace net
}  // namespace braid
