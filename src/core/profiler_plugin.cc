#include "src/core/profiler_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "include/nccl_profiler.h"
#include "src/common/dyn_lib.h"
#include "src/common/logging.h"
#include "src/common/params.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace {

// The int every init() receives as eActivationMask: the plugin writes it, braid reads it at each API call.
int gEventMask = 0;

// NCCL's strings for the descriptors (collKindName gives NCCL's function names).
const char* dtypeString(DType t) {
  static const char* const kNames[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                       "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  const auto i = static_cast<size_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "Unknown";
}

bool isP2p(CollKind k) {
  return k == CollKind::kSend || k == CollKind::kRecv;
}

// Which event types braid starts for a mask: a parent whenever any of its descendants is wanted (as NCCL does).
constexpr int kBelowColl =
    ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kBelowP2p =
    ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kBelowGroup = ncclProfileGroup | kBelowColl | kBelowP2p;
constexpr int kBelowCollApi = ncclProfileCollApi | kBelowColl;
constexpr int kBelowP2pApi = ncclProfileP2pApi | kBelowP2p;
constexpr int kBelowGroupApi =
    ncclProfileGroupApi | kBelowCollApi | kBelowP2pApi | ncclProfileKernelLaunch | kBelowGroup;

// One event as braid describes it, whatever the plugin's version.
struct Event {
  uint64_t type = 0;
  void* parent = nullptr;
  int rank = 0;
  int groupDepth = 0;
  const ProfiledOp* op = nullptr;
  uint64_t seq = 0;
  int nChannels = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  void* parentGroup = nullptr;
};

const char* funcOf(const ProfiledOp& op) {
  return op.func != nullptr ? op.func : collKindName(op.kind);
}

// Every version's coll and p2p members share these fields' names and types.
template <typename C>
void fillColl(const Event& e, C* c) {
  const ProfiledOp& op = *e.op;
  c->seqNumber = e.seq;
  c->func = funcOf(op);
  c->sendBuff = op.sendBuff;
  c->recvBuff = op.recvBuff;
  c->count = op.count;
  c->root = op.root;
  c->datatype = dtypeString(op.dtype);
  c->nChannels = static_cast<uint8_t>(e.nChannels);
  c->algo = e.algo;
  c->proto = e.proto;
}

template <typename P>
void fillP2p(const Event& e, P* p) {
  const ProfiledOp& op = *e.op;
  p->func = funcOf(op);
  p->buff = op.kind == CollKind::kSend ? const_cast<void*>(op.sendBuff) : op.recvBuff;
  p->datatype = dtypeString(op.dtype);
  p->count = op.count;
  p->peer = op.root;
  p->nChannels = static_cast<uint8_t>(e.nChannels);
}

// v5, v6 and v7 descriptors share these members' names, types and places.
template <typename D>
void fillCommon(const Event& e, D* d) {
  std::memset(d, 0, sizeof(*d));
  d->type = e.type;
  d->parentObj = e.parent;
  d->rank = e.rank;
  const ProfiledOp* op = e.op;
  switch (e.type) {
    case ncclProfileGroupApi:
      d->groupApi.graphCaptured = false;
      d->groupApi.groupDepth = e.groupDepth;
      break;
    case ncclProfileCollApi:
      d->collApi.func = funcOf(*op);
      d->collApi.count = op->count;
      d->collApi.datatype = dtypeString(op->dtype);
      d->collApi.root = op->root;
      d->collApi.stream = op->stream;
      break;
    case ncclProfileP2pApi:
      d->p2pApi.func = funcOf(*op);
      d->p2pApi.count = op->count;
      d->p2pApi.datatype = dtypeString(op->dtype);
      d->p2pApi.stream = op->stream;
      break;
    case ncclProfileKernelLaunch:
      d->kernelLaunch.stream = op->stream;
      break;
    case ncclProfileColl:
      fillColl(e, &d->coll);
      d->coll.parentGroup = e.parentGroup;
      break;
    case ncclProfileP2p:
      fillP2p(e, &d->p2p);
      d->p2p.parentGroup = e.parentGroup;
      break;
    default:
      break;
  }
}

void fillV7(const Event& e, ncclProfilerEventDescr_v7_t* d) {
  fillCommon(e, d);
  if (e.op == nullptr) return;
  if (e.type == ncclProfileCollApi) d->collApi.userTag = e.op->userTag;
  if (e.type == ncclProfileP2pApi) d->p2pApi.userTag = e.op->userTag;
  if (e.type == ncclProfileColl) d->coll.userTag = e.op->userTag;
  if (e.type == ncclProfileP2p) d->p2p.userTag = e.op->userTag;
}

// v4 has no API events and no parentGroup: a Coll's parent is the Group.
bool fillV4(const Event& e, ncclProfilerEventDescr_v4_t* d) {
  std::memset(d, 0, sizeof(*d));
  d->type = static_cast<uint8_t>(e.type);
  d->rank = e.rank;
  switch (e.type) {
    case ncclProfileGroup:
      return true;
    case ncclProfileColl:
      d->parentObj = e.parentGroup;
      fillColl(e, &d->coll);
      return true;
    case ncclProfileP2p:
      d->parentObj = e.parentGroup;
      fillP2p(e, &d->p2p);
      return true;
    default:
      return false;  // no such event in v4
  }
}

}  // namespace

// The loaded library and its table (one per process, kept while any communicator uses it).
class ProfilerLibrary {
 public:
  ProfilerLibrary(void* handle, std::string path, int version, const void* table, bool ownsHandle)
      : handle_(handle), path_(std::move(path)), version_(version), table_(table), ownsHandle_(ownsHandle) {
    const char* n = *static_cast<const char* const*>(table);  // every version's first member is the name
    description_ = strPrintf("%s (%s, ncclProfiler_v%d)", n != nullptr ? n : "?", path_.c_str(), version_);
  }
  ~ProfilerLibrary() {
    if (ownsHandle_) dlclose(handle_);
  }
  int version() const { return version_; }
  const char* describe() const { return description_.c_str(); }
  // Every version's functions after init have one shape but for the descriptor type (v5's table stands for the
  // layout of the pointers).
  const ncclProfiler_v5_t* table() const { return static_cast<const ncclProfiler_v5_t*>(table_); }
  const ncclProfiler_v4_t* tableV4() const { return static_cast<const ncclProfiler_v4_t*>(table_); }

 private:
  void* handle_;
  std::string path_;
  int version_;
  const void* table_;
  bool ownsHandle_;
  std::string description_;
};

namespace {

// NCCL_PROFILER_PLUGIN's candidates: X as given, then libnccl-profiler-X.so (NCCL tries the literal name first).
std::vector<std::string> profilerCandidates(const std::string& spec) {
  if (spec.empty()) return {"libnccl-profiler.so"};
  std::vector<std::string> c{spec};
  const bool libSo = spec.size() > 6 && spec.compare(0, 3, "lib") == 0 && spec.compare(spec.size() - 3, 3, ".so") == 0;
  if (spec.find('/') == std::string::npos && !libSo) c.push_back("libnccl-profiler-" + spec + ".so");
  return c;
}

bool isStaticPlugin(const std::string& spec) {
  return !spec.empty() && strncasecmp(spec.c_str(), "STATIC_PLUGIN", spec.size()) == 0;
}

std::shared_ptr<ProfilerLibrary> findTable(void* handle, const std::string& path, bool owns, bool named) {
  for (int v = 7; v >= 4; --v) {
    const void* table = dlsym(handle, strPrintf("ncclProfiler_v%d", v).c_str());
    if (table != nullptr) return std::make_shared<ProfilerLibrary>(handle, path, v, table, owns);
  }
  if (named) {
    const bool old = dlsym(handle, "ncclProfiler_v3") != nullptr || dlsym(handle, "ncclProfiler_v2") != nullptr ||
                     dlsym(handle, "ncclProfiler_v1") != nullptr;
    BRAID_WARN("PROFILER/Plugin: %s exports none of ncclProfiler_v7 .. _v4%s: no profiler", path.c_str(),
               old ? " (only an older ABI, v1-v3, which braid does not load)" : "");
  }
  if (owns) dlclose(handle);
  return nullptr;
}

std::shared_ptr<ProfilerLibrary> loadLibrary(const std::string& spec) {
  if (strcasecmp(spec.c_str(), "none") == 0) return nullptr;
  if (isStaticPlugin(spec)) {
    void* self = dlopen(nullptr, RTLD_NOW);
    return self == nullptr ? nullptr : findTable(self, "the program (STATIC_PLUGIN)", true, true);
  }
  std::vector<std::string> candidates = profilerCandidates(spec);
  std::string path, failures;
  if (void* handle = openPluginLibrary(candidates, &path, &failures))
    return findTable(handle, path, true, !spec.empty());
  // One library may provide several plugin kinds: the net plugin's is the last place looked in.
  const std::string net = params::NetPlugin();
  if (net != "none") {
    std::string netFailures;
    if (void* handle = openPluginLibrary(pluginCandidates("nccl-net", net), &path, &netFailures)) {
      if (auto lib = findTable(handle, path, true, false)) return lib;
    }
  }
  if (!spec.empty()) {
    BRAID_WARN("PROFILER/Plugin: NCCL_PROFILER_PLUGIN=%s could not be loaded (%s): no profiler", spec.c_str(),
               failures.c_str());
  }
  return nullptr;
}

// As NCCL: loaded at the first communicator's init, shared by every communicator while any lives, unloaded after
// the last one's finalize (a later communicator loads it again, reading NCCL_PROFILER_PLUGIN anew).
std::shared_ptr<ProfilerLibrary> processLibrary() {
  static std::mutex mu;
  static std::weak_ptr<ProfilerLibrary> live;
  std::lock_guard<std::mutex> lock(mu);
  if (std::shared_ptr<ProfilerLibrary> lib = live.lock()) return lib;
  std::shared_ptr<ProfilerLibrary> lib = loadLibrary(params::ProfilerPlugin());
  live = lib;
  return lib;
}

}  // namespace

std::unique_ptr<CommProfiler> CommProfiler::open(const ProfilerCommInfo& info) {
  std::shared_ptr<ProfilerLibrary> lib = processLibrary();
  if (lib == nullptr) return nullptr;
  void* ctx = nullptr;
  const char* name = info.commName.empty() ? nullptr : info.commName.c_str();
  const ncclResult_t rc = lib->version() == 4 ? lib->tableV4()->init(&ctx, &gEventMask, name, info.commId, info.nNodes,
                                                                     info.nranks, info.rank, net::netLogger)
                                              : lib->table()->init(&ctx, info.commId, &gEventMask, name, info.nNodes,
                                                                   info.nranks, info.rank, net::netLogger);
  if (rc != ncclSuccess) {
    BRAID_WARN("PROFILER/Plugin: %s: init returned %d on rank %d: this communicator is not profiled", lib->describe(),
               rc, info.rank);
    return nullptr;
  }
  BRAID_INFO(kLogInit, "PROFILER/Plugin: rank %d: using %s", info.rank, lib->describe());
  return std::unique_ptr<CommProfiler>(new CommProfiler(std::move(lib), ctx, info.rank));
}

CommProfiler::~CommProfiler() {
  groupDone();
  const ncclResult_t rc = lib_->table()->finalize(ctx_);
  if (rc != ncclSuccess) BRAID_WARN("PROFILER/Plugin: %s: finalize returned %d", lib_->describe(), rc);
}

int CommProfiler::mask() const {
  return __atomic_load_n(&gEventMask, __ATOMIC_RELAXED);
}

void* CommProfiler::start(const void* event) {
  const Event& e = *static_cast<const Event*>(event);
  void* handle = nullptr;
  ncclResult_t rc = ncclSuccess;
  switch (lib_->version()) {
    case 4: {
      ncclProfilerEventDescr_v4_t d;
      if (!fillV4(e, &d)) return nullptr;
      rc = lib_->tableV4()->startEvent(ctx_, &handle, &d);
      break;
    }
    case 5: {
      ncclProfilerEventDescr_v5_t d;
      fillCommon(e, &d);
      rc = lib_->table()->startEvent(ctx_, &handle, &d);
      break;
    }
    case 6: {
      ncclProfilerEventDescr_v6_t d;
      fillCommon(e, &d);
      rc = reinterpret_cast<const ncclProfiler_v6_t*>(lib_->table())->startEvent(ctx_, &handle, &d);
      break;
    }
    default: {
      ncclProfilerEventDescr_v7_t d;
      fillV7(e, &d);
      rc = reinterpret_cast<const ncclProfiler_v7_t*>(lib_->table())->startEvent(ctx_, &handle, &d);
      break;
    }
  }
  if (rc != ncclSuccess) {
    BRAID_INFO(kLogColl, "PROFILER/Plugin: %s: startEvent(type 0x%llx) returned %d", lib_->describe(),
               static_cast<unsigned long long>(e.type), rc);
    return nullptr;
  }
  return handle;
}

void* CommProfiler::apiCall(const ProfiledOp& call, int groupDepth) {
  const int m = mask();
  if (lib_->version() < 5 || (m & kBelowGroupApi) == 0) return nullptr;
  if (!groupApiOpen_) {
    groupApiOpen_ = true;
    Event g;
    g.type = ncclProfileGroupApi;
    g.rank = rank_;
    g.groupDepth = groupDepth;
    groupApi_ = start(&g);
    if (groupApi_ != nullptr) lib_->table()->recordEventState(groupApi_, ncclProfilerGroupStartApiStop, nullptr);
  }
  const bool p2p = isP2p(call.kind);
  // An all-to-all, gather or scatter call is a CollApi whose operations are sends and receives.
  const int below = p2p ? kBelowP2pApi : call.kind == CollKind::kAlltoAll ? kBelowCollApi | kBelowP2p : kBelowCollApi;
  if ((m & below) == 0) return nullptr;
  Event e;
  e.type = p2p ? ncclProfileP2pApi : ncclProfileCollApi;
  e.parent = groupApi_;
  e.rank = rank_;
  e.op = &call;
  void* h = start(&e);
  if (h != nullptr) lib_->table()->stopEvent(h);
  return h;
}

void CommProfiler::groupLaunch() {
  if (groupApi_ != nullptr) lib_->table()->recordEventState(groupApi_, ncclProfilerGroupEndApiStart, nullptr);
  if (groupOpen_ || (mask() & kBelowGroup) == 0) return;
  groupOpen_ = true;
  Event g;
  g.type = ncclProfileGroup;
  g.rank = rank_;
  group_ = start(&g);
}

void* CommProfiler::opStart(const ProfiledOp& op, void* api, int nChannels, const char* algo, const char* proto,
                            uint64_t* seq) {
  const bool p2p = isP2p(op.kind);
  if ((mask() & (p2p ? kBelowP2p : kBelowColl)) == 0) return nullptr;
  Event e;
  e.type = p2p ? ncclProfileP2p : ncclProfileColl;
  e.parent = api;
  e.rank = rank_;
  e.op = &op;
  e.nChannels = nChannels;
  e.algo = algo;
  e.proto = proto;
  e.parentGroup = group_;
  if (!p2p && seq != nullptr) {
    if (*seq == ~uint64_t(0)) *seq = seq_[static_cast<size_t>(op.kind) % 16]++;
    e.seq = *seq;
  }
  return start(&e);
}

void* CommProfiler::kernelLaunch(void* stream) {
  if (lib_->version() < 5 || (mask() & ncclProfileKernelLaunch) == 0) return nullptr;
  ProfiledOp launch;
  launch.stream = stream;
  Event e;
  e.type = ncclProfileKernelLaunch;
  e.parent = groupApi_;
  e.rank = rank_;
  e.op = &launch;
  return start(&e);
}

void CommProfiler::opStop(void* event) {
  if (event != nullptr) lib_->table()->stopEvent(event);
}

void CommProfiler::groupDone() {
  if (group_ != nullptr) lib_->table()->stopEvent(group_);
  if (groupApi_ != nullptr) lib_->table()->stopEvent(groupApi_);
  group_ = groupApi_ = nullptr;
  groupOpen_ = groupApiOpen_ = false;
}

}  // namespace braid
