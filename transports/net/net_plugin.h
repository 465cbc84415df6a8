// The net-plugin layer: loads networks (external plugins and the built-in Socket, IB and OFI networks, all behind
// include/nccl_net.h) and wraps whichever ABI version a network speaks in one C++ class, NetModule, whose methods
// return Status. The proxy/net transport uses only this header.
//
// Selection (loadNetworks):
//   1. External plugin, per NCCL_NET_PLUGIN: unset tries libnccl-net.so; "NAME" tries libnccl-net-NAME.so, then
//      NAME as given (a path or a soname); "none" loads nothing. The newest of ncclNetPlugin_v12 .. _v8 is used.
//      A v11/v12 plugin gets one context per communicator (NetModule::openContext) and one for the process's
//      device queries (commId 0, opened at load, kept for the process's life).
//   2. Built-ins: IB (skipped when NCCL_IB_DISABLE=1), OFI (libfabric), Socket. IB and OFI dlopen() their library
//      at init; without it they have no devices (an INFO line and NCCL_NET's error name the library).
//   3. NCCL_NET=name (case-insensitive; "Libfabric" is an alias of OFI) picks that network, which must have a
//      device; an unknown name is an error listing the networks available. Unset: the first of external plugin,
//      IB, OFI-on-a-hardware-provider, Socket that has a device. OFI on a software provider (tcp, udp, shm,
//      sockets) is only used when NCCL_NET asks for it: without a plugin NCCL uses Socket, and so does braid
//      (reasons and measurements in docs/networks.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "include/nccl_net.h"
#include "src/common/status.h"

namespace braid {
namespace net {

using NetHandle = std::array<char, NCCL_NET_HANDLE_MAXSIZE>;

// One device's properties, whatever ABI version reported them.
struct NetProperties {
  std::string name;
  std::string pciPath;
  uint64_t guid = 0;
  int ptrSupport = 0;  // NCCL_PTR_* bits
  bool regIsGlobal = false;
  bool forceFlush = false;
  int speedMbps = 0;
  int port = 0;
  float latencyUs = 0;
  int maxComms = 0;
  int maxRecvs = 1;
  int netDeviceType = NCCL_NET_DEVICE_HOST;
  int netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  size_t maxP2pBytes = 0;         // 0: no limit beyond the ABI's (INT_MAX for v8)
  int railId = -1, planeId = -1;  // v12: the device's rail and plane (NCCL_NET_ID_UNDEF: not said)
};

// Keeps a dlopen'ed plugin loaded while any module from it lives.
class PluginLibrary;
class NetModule;

// A communicator's context in a network: for ABI v11+ what init() returned for it, finalize()d when the last
// holder lets go (the communicator's transport state and each of its connections hold it, so connections closing
// after ncclCommDestroy still have it). Older ABIs and the built-in networks have none: ctx() is null, and the
// traffic class reaches v10's connect() instead.
class NetContext {
 public:
  ~NetContext();
  NetContext(const NetContext&) = delete;
  NetContext& operator=(const NetContext&) = delete;
  void* ctx() const { return ctx_; }
  int trafficClass() const { return trafficClass_; }
  uint64_t commId() const { return commId_; }

 private:
  friend class NetModule;
  NetContext(NetModule* net, void* ctx, uint64_t commId, int trafficClass)
      : net_(net), ctx_(ctx), commId_(commId), trafficClass_(trafficClass) {}
  NetModule* net_;
  void* ctx_;
  uint64_t commId_;
  int trafficClass_;
};

// What setNetAttr (v11+) is told about a communicator when its context opens.
struct NetCommHints {
  int nranks = 1;
  int nChannels = 1;
};

// One network. Not copyable; owned by a NetSelection. Thread-safety is the plugin's (include/nccl_net.h): calls
// on distinct comm objects may run concurrently, calls on one comm must be serialised by the caller.
class NetModule {
 public:
  // Wraps a function table of the given ABI version (8 to 12). `lib` is null for built-in networks.
  static std::unique_ptr<NetModule> wrapV8(const ncclNet_v8_t* table, std::shared_ptr<PluginLibrary> lib);
  static std::unique_ptr<NetModule> wrapV9(const ncclNet_v9_t* table, std::shared_ptr<PluginLibrary> lib);
  static std::unique_ptr<NetModule> wrapV10(const ncclNet_v10_t* table, std::shared_ptr<PluginLibrary> lib);
  static std::unique_ptr<NetModule> wrapV11(const ncclNet_v11_t* table, std::shared_ptr<PluginLibrary> lib);
  static std::unique_ptr<NetModule> wrapV12(const ncclNet_v12_t* table, std::shared_ptr<PluginLibrary> lib);
  ~NetModule();
  NetModule(const NetModule&) = delete;
  NetModule& operator=(const NetModule&) = delete;

  const std::string& name() const { return name_; }
  int abiVersion() const { return version_; }
  bool external() const { return lib_ != nullptr; }
  // Where it came from: "built-in" or the plugin file.
  std::string origin() const;
  // v11+: a context per communicator.
  bool perCommContext() const { return v12_ != nullptr; }

  // Once per process, before anything else (v11+: opens the process's context, commId 0).
  [[nodiscard]] Status init();
  [[nodiscard]] Result<int> devices();
  [[nodiscard]] Result<NetProperties> getProperties(int dev);
  // The context of communicator `commId` (v11+: init() for it, then setNetAttr with `hints` when the plugin has
  // it; a failing setNetAttr is only logged, as NCCL ignores its result). Thread-safe.
  [[nodiscard]] Result<std::shared_ptr<NetContext>> openContext(uint64_t commId, int trafficClass,
                                                                const NetCommHints& hints);

  // `ctx`: the communicator's context (null: the process's, with no traffic class).
  [[nodiscard]] Status listen(const NetContext* ctx, int dev, NetHandle* handle, void** listenComm);
  // Non-blocking: *sendComm stays null until established; call again with the same handle.
  [[nodiscard]] Status connect(const NetContext* ctx, int dev, NetHandle* handle, void** sendComm);
  // The same through the process's context.
  [[nodiscard]] Status listen(int dev, NetHandle* handle, void** listenComm) {
    return listen(nullptr, dev, handle, listenComm);
  }
  [[nodiscard]] Status connect(int dev, NetHandle* handle, void** sendComm) {
    return connect(nullptr, dev, handle, sendComm);
  }
  // Non-blocking: *recvComm stays null until a peer connected.
  [[nodiscard]] Status accept(void* listenComm, void** recvComm);

  [[nodiscard]] Status regMr(void* comm, void* data, size_t size, int type, void** mhandle);
  [[nodiscard]] Status regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                   void** mhandle);
  [[nodiscard]] Status deregMr(void* comm, void* mhandle);

  // *request null: too many in flight, retry later. Sizes above the ABI's limit (INT_MAX for v8) are an error.
  [[nodiscard]] Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  [[nodiscard]] Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                             void** request);
  [[nodiscard]] Status iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles, void** request);
  // *done true when complete; sizes (n entries for a grouped receive, 1 for a send) then hold bytes moved.
  [[nodiscard]] Status test(void* request, bool* done, int* sizes);

  [[nodiscard]] Status closeSend(void* sendComm);
  [[nodiscard]] Status closeRecv(void* recvComm);
  [[nodiscard]] Status closeListen(void* listenComm);

 private:
  NetModule() = default;
  Status check(ncclResult_t rc, const char* what) const;

  std::string name_;
  int version_ = 0;
  const ncclNet_v8_t* v8_ = nullptr;
  const ncclNet_v9_t* v9_ = nullptr;
  const ncclNet_v10_t* v10_ = nullptr;
  // v11 and v12: one table type (their members are the same pointers in the same order; only getProperties' and
  // makeVDevice's structs differ, and getProperties is called through the v11 table for v11).
  const ncclNet_v12_t* v12_ = nullptr;
  const ncclNet_v11_t* v11_ = nullptr;
  void* processCtx_ = nullptr;  // v11+: the context init() opened for the process
  std::shared_ptr<PluginLibrary> lib_;
  friend class NetContext;
};

// The networks this process can use, and the one NCCL_NET (or the default order) chose.
struct NetSelection {
  std::vector<std::unique_ptr<NetModule>> modules;  // initialised, in the default order
  NetModule* chosen = nullptr;
  std::string reason;  // why `chosen` won, for the INFO line
};

// Loads and initialises every network, then picks one (see the top of this file). Errors: NCCL_NET names no
// available network (kInvalidArgument, naming the value and the networks available), or it names one with no
// device (naming the library a built-in could not load, when that is why). A missing or broken plugin is not an
// error (WARN, then the built-ins).
[[nodiscard]] Result<NetSelection> loadNetworks();

// The process's networks: loadNetworks() on the first successful call, then the same selection until exit (NCCL
// also loads its net plugin once per process), so later changes to NCCL_NET / NCCL_NET_PLUGIN are not seen. A
// failure is not cached: the next call tries again. Thread-safe. This is what the communicator's transport uses.
[[nodiscard]] Result<NetSelection*> processNetworks();

// Loads one external plugin, as NCCL_NET_PLUGIN would ("" = libnccl-net.so). Null (and ok) for "none".
[[nodiscard]] Result<std::unique_ptr<NetModule>> loadNetPlugin(const std::string& spec);

// The built-in networks' function tables (each null when not compiled in).
const ncclNet_v8_t* socketNetTable();
const ncclNet_v8_t* ibNetTable();
const ncclNet_v8_t* ofiNetTable();

// The logger braid hands to every network's init(): writes NCCL-format lines and remembers this thread's last
// WARN, which NetModule puts into the Status of the failing call.
void netLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);

}  // namespace net
}  // namespace braid
