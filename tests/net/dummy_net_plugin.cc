// A tiny external net plugin for the loader tests: an in-memory loopback network (connections within one
// process), built as its own shared library and exported exactly as a third-party plugin would, through
// include/nccl_net.h only. Built five times: exporting ncclNetPlugin_v8 ("DummyLoop"), with BRAID_DUMMY_V9
// ncclNetPlugin_v9 ("DummyLoop9"), with BRAID_DUMMY_V10 ncclNetPlugin_v10 ("DummyLoop10"), with BRAID_DUMMY_V11
// ncclNetPlugin_v11 ("DummyLoop11") and with BRAID_DUMMY_V12 ncclNetPlugin_v12 ("DummyLoop12"), so every adapter
// of the loader runs. The v11/v12 builds keep a record of their contexts (braidDummyContexts, below): listen and
// connect fail on a context that init() did not return or that finalize() released.
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "nccl_net.h"

namespace {

struct Msg {
  std::vector<char> bytes;
  int tag;
};

struct Channel {
  std::mutex mu;
  std::deque<Msg> queue;
  bool closed = false;
};

struct Listen {
  std::deque<std::shared_ptr<Channel>> incoming;
};

struct SendComm {
  std::shared_ptr<Channel> ch;
};
struct RecvComm {
  std::shared_ptr<Channel> ch;
};

struct Request {
  RecvComm* recv = nullptr;  // null for a send (complete at once: the bytes were copied)
  int n = 1;
  char* data[8] = {};
  size_t cap[8] = {};
  int tags[8] = {};
  bool filled[8] = {};
  size_t got[8] = {};
};

struct Handle {
  unsigned long long magic;
  int id;
};
constexpr unsigned long long kMagic = 0x64756d6d796c6f6fULL;

std::mutex gMu;
std::map<int, Listen*> gListens;
int gNextId = 1;
ncclDebugLogger_t gLog = nullptr;

[[maybe_unused]] ncclResult_t dInit(ncclDebugLogger_t log) {
  gLog = log;
  return ncclSuccess;
}
ncclResult_t dDevices(int* n) {
  *n = 1;
  return ncclSuccess;
}

template <typename P>
ncclResult_t fillProps(int dev, P* p) {
  if (dev != 0) {
    if (gLog != nullptr) gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "DummyLoop: no device %d", dev);
    return ncclInvalidArgument;
  }
  memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>("loop0");
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 1000;
  p->maxComms = 1024;
  p->maxRecvs = 8;
  return ncclSuccess;
}

ncclResult_t dListen(int dev, void* handle, void** listenComm) {
  std::lock_guard<std::mutex> lk(gMu);
  auto* h = static_cast<Handle*>(handle);
  h->magic = kMagic;
  h->id = gNextId++;
  auto* l = new Listen();
  gListens[h->id] = l;
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t dConnectImpl(void* handle, void** sendComm) {
  auto* h = static_cast<Handle*>(handle);
  std::lock_guard<std::mutex> lk(gMu);
  if (h->magic != kMagic || gListens.count(h->id) == 0) {
    if (gLog != nullptr) gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "DummyLoop: bad handle");
    return ncclInvalidArgument;
  }
  auto ch = std::make_shared<Channel>();
  gListens[h->id]->incoming.push_back(ch);
  *sendComm = new SendComm{ch};
  return ncclSuccess;
}

ncclResult_t dAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t**) {
  std::lock_guard<std::mutex> lk(gMu);
  auto* l = static_cast<Listen*>(listenComm);
  *recvComm = nullptr;
  if (!l->incoming.empty()) {
    *recvComm = new RecvComm{l->incoming.front()};
    l->incoming.pop_front();
  }
  return ncclSuccess;
}

ncclResult_t dRegMr(void*, void*, size_t, int, void** mh) {
  *mh = nullptr;
  return ncclSuccess;
}
ncclResult_t dRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return ncclInternalError;
}
ncclResult_t dDeregMr(void*, void*) {
  return ncclSuccess;
}

ncclResult_t dIsendImpl(void* sendComm, void* data, size_t size, int tag, void** request) {
  auto* s = static_cast<SendComm*>(sendComm);
  std::lock_guard<std::mutex> lk(s->ch->mu);
  Msg m;
  m.bytes.assign(static_cast<char*>(data), static_cast<char*>(data) + size);
  m.tag = tag;
  s->ch->queue.push_back(std::move(m));
  auto* r = new Request();
  r->got[0] = size;
  r->filled[0] = true;
  *request = r;
  return ncclSuccess;
}

ncclResult_t dIrecvImpl(void* recvComm, int n, void** data, const size_t* sizes, const int* tags, void** request) {
  if (n < 1 || n > 8) return ncclInvalidArgument;
  auto* r = new Request();
  r->recv = static_cast<RecvComm*>(recvComm);
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = static_cast<char*>(data[i]);
    r->cap[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t dIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t dTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  *done = 0;
  if (r->recv != nullptr) {
    Channel& ch = *r->recv->ch;
    std::lock_guard<std::mutex> lk(ch.mu);
    while (!ch.queue.empty()) {
      int slot = -1;
      for (int i = 0; i < r->n && slot < 0; ++i) {
        if (!r->filled[i] && r->tags[i] == ch.queue.front().tag) slot = i;
      }
      if (slot < 0) break;
      Msg& m = ch.queue.front();
      if (m.bytes.size() > r->cap[slot]) return ncclInvalidUsage;
      if (!m.bytes.empty()) memcpy(r->data[slot], m.bytes.data(), m.bytes.size());
      r->got[slot] = m.bytes.size();
      r->filled[slot] = true;
      ch.queue.pop_front();
    }
    for (int i = 0; i < r->n; ++i) {
      if (!r->filled[i]) {
        if (ch.closed) {
          if (gLog != nullptr) gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "DummyLoop: peer closed");
          return ncclRemoteError;
        }
        return ncclSuccess;
      }
    }
  }
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->got[i]);
  }
  *done = 1;
  delete r;
  return ncclSuccess;
}

ncclResult_t dCloseSend(void* c) {
  auto* s = static_cast<SendComm*>(c);
  {
    std::lock_guard<std::mutex> lk(s->ch->mu);
    s->ch->closed = true;
  }
  delete s;
  return ncclSuccess;
}
ncclResult_t dCloseRecv(void* c) {
  delete static_cast<RecvComm*>(c);
  return ncclSuccess;
}
ncclResult_t dCloseListen(void* c) {
  std::lock_guard<std::mutex> lk(gMu);
  for (auto it = gListens.begin(); it != gListens.end(); ++it) {
    if (it->second == c) {
      gListens.erase(it);
      break;
    }
  }
  delete static_cast<Listen*>(c);
  return ncclSuccess;
}
ncclResult_t dGetDeviceMr(void*, void*, void**) {
  return ncclInternalError;
}
ncclResult_t dIrecvConsumed(void*, int, void*) {
  return ncclSuccess;
}

#if defined(BRAID_DUMMY_V11) || defined(BRAID_DUMMY_V12)
struct Context {
  uint64_t commId;
  int trafficClass;
  bool live;
  ncclNetAttr_v11_t attr;
  int attrCalls;
  int uses;  // listen and connect calls made through it
};
std::vector<Context*> gContexts;  // every context ever opened (never freed: the record outlives finalize)

ncclResult_t dInit11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t log,
                     ncclProfilerCallback_t) {
  std::lock_guard<std::mutex> lk(gMu);
  gLog = log;
  auto* c = new Context{commId, config != nullptr ? config->trafficClass : -2, true, {}, 0, 0};
  gContexts.push_back(c);
  *ctx = c;
  return ncclSuccess;
}
// Counts a use of `ctx`; false when init() did not return it or finalize() released it.
bool liveContext(void* ctx) {
  std::lock_guard<std::mutex> lk(gMu);
  for (Context* c : gContexts) {
    if (c == ctx && c->live) ++c->uses;
    if (c == ctx) return c->live;
  }
  return false;
}
ncclResult_t badContext(void* ctx) {
  if (gLog != nullptr) gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "DummyLoop: context %p is not live", ctx);
  return ncclInvalidUsage;
}
ncclResult_t dListen11(void* ctx, int dev, void* handle, void** listenComm) {
  if (!liveContext(ctx)) return badContext(ctx);
  return dListen(dev, handle, listenComm);
}
ncclResult_t dConnect11(void* ctx, int, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t**) {
  if (!liveContext(ctx)) return badContext(ctx);
  return dConnectImpl(handle, sendComm);
}
ncclResult_t dIsend11(void* s, void* data, size_t size, int tag, void*, void*, void** req) {
  return dIsendImpl(s, data, size, tag, req);
}
ncclResult_t dIrecv11(void* r, int n, void** data, size_t* sizes, int* tags, void**, void**, void** req) {
  return dIrecvImpl(r, n, data, sizes, tags, req);
}
ncclResult_t dFinalize(void* ctx) {
  if (!liveContext(ctx)) return badContext(ctx);
  std::lock_guard<std::mutex> lk(gMu);
  static_cast<Context*>(ctx)->live = false;
  return ncclSuccess;
}
[[maybe_unused]] ncclResult_t dSetNetAttr(void* ctx, ncclNetAttr_v11_t* attr) {
  if (!liveContext(ctx)) return badContext(ctx);
  std::lock_guard<std::mutex> lk(gMu);
  static_cast<Context*>(ctx)->attr = *attr;
  ++static_cast<Context*>(ctx)->attrCalls;
  return ncclSuccess;
}
#if defined(BRAID_DUMMY_V11)
ncclResult_t dGetProps11(int dev, ncclNetProperties_v11_t* p) {
  ncclResult_t rc = fillProps(dev, p);
  p->maxP2pBytes = 1ull << 34;
  p->maxMultiRequestSize = 1;
  return rc;
}
ncclResult_t dMakeVDevice11(int*, ncclNetVDeviceProps_v11_t*) {
  return ncclInternalError;
}
#else
ncclResult_t dGetProps12(int dev, ncclNetProperties_v12_t* p) {
  ncclResult_t rc = fillProps(dev, p);
  p->maxP2pBytes = 1ull << 35;
  p->maxMultiRequestSize = 1;
  p->railId = 3;
  p->planeId = 1;
  return rc;
}
ncclResult_t dMakeVDevice12(int*, ncclNetVDeviceProps_v12_t*) {
  return ncclInternalError;
}
#endif
#elif !defined(BRAID_DUMMY_V10) && !defined(BRAID_DUMMY_V9)
ncclResult_t dGetProps8(int dev, ncclNetProperties_v8_t* p) {
  return fillProps(dev, p);
}
ncclResult_t dConnect8(int, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t**) {
  return dConnectImpl(handle, sendComm);
}
ncclResult_t dIsend8(void* s, void* data, int size, int tag, void*, void** req) {
  return dIsendImpl(s, data, static_cast<size_t>(size), tag, req);
}
ncclResult_t dIrecv8(void* r, int n, void** data, int* sizes, int* tags, void**, void** req) {
  size_t sz[8];
  for (int i = 0; i < n && i < 8; ++i) sz[i] = static_cast<size_t>(sizes[i]);
  return dIrecvImpl(r, n, data, sz, tags, req);
}
#elif defined(BRAID_DUMMY_V9)
ncclResult_t dGetProps9(int dev, ncclNetProperties_v9_t* p) {
  ncclResult_t rc = fillProps(dev, p);
  p->maxP2pBytes = 1ull << 33;
  return rc;
}
ncclResult_t dConnect9(int, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t**) {
  return dConnectImpl(handle, sendComm);
}
ncclResult_t dIsend9(void* s, void* data, size_t size, int tag, void*, void** req) {
  return dIsendImpl(s, data, size, tag, req);
}
ncclResult_t dIrecv9(void* r, int n, void** data, size_t* sizes, int* tags, void**, void** req) {
  return dIrecvImpl(r, n, data, sizes, tags, req);
}
ncclResult_t dMakeVDevice9(int*, ncclNetVDeviceProps_v9_t*) {
  return ncclInternalError;
}
#else
ncclResult_t dInit10(ncclDebugLogger_t log, ncclProfilerCallback_t) {
  return dInit(log);
}
ncclResult_t dGetProps10(int dev, ncclNetProperties_v10_t* p) {
  ncclResult_t rc = fillProps(dev, p);
  p->maxP2pBytes = 1ull << 40;
  return rc;
}
ncclResult_t dConnect10(int, ncclNetCommConfig_v10_t*, void* handle, void** sendComm, ncclNetDeviceHandle_v10_t**) {
  return dConnectImpl(handle, sendComm);
}
ncclResult_t dIsend10(void* s, void* data, size_t size, int tag, void*, void*, void** req) {
  return dIsendImpl(s, data, size, tag, req);
}
ncclResult_t dIrecv10(void* r, int n, void** data, size_t* sizes, int* tags, void**, void**, void** req) {
  return dIrecvImpl(r, n, data, sizes, tags, req);
}
ncclResult_t dMakeVDevice(int*, ncclNetVDeviceProps_v10_t*) {
  return ncclInternalError;
}
#endif

}  // namespace

extern "C" {
#if defined(BRAID_DUMMY_V11) || defined(BRAID_DUMMY_V12)
// The test's view of the contexts: how many were opened, and context i's commId, traffic class, whether it is
// still live, how often setNetAttr was called on it (counting finalize and setNetAttr as uses too), how many
// listen/connect calls went through it and the last sendCommAttr it was given.
__attribute__((visibility("default"))) int braidDummyContexts(int i, uint64_t* commId, int* trafficClass, int* live,
                                                              int* attrCalls, int* uses,
                                                              ncclNetCommAttr_v11_t* sendAttr) {
  std::lock_guard<std::mutex> lk(gMu);
  if (i >= 0 && i < static_cast<int>(gContexts.size())) {
    const Context& c = *gContexts[static_cast<size_t>(i)];
    *commId = c.commId;
    *trafficClass = c.trafficClass;
    *live = c.live ? 1 : 0;
    *attrCalls = c.attrCalls;
    *uses = c.uses;
    *sendAttr = c.attr.sendCommAttr;
  }
  return static_cast<int>(gContexts.size());
}
#endif
#if defined(BRAID_DUMMY_V11)
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    "DummyLoop11", dInit11,      dDevices,       dGetProps11,    dListen11, dConnect11,  dAccept,    dRegMr,
    dRegMrDmaBuf,  dDeregMr,     dIsend11,       dIrecv11,       dIflush,   dTest,       dCloseSend, dCloseRecv,
    dCloseListen,  dGetDeviceMr, dIrecvConsumed, dMakeVDevice11, dFinalize, dSetNetAttr,
};
#elif defined(BRAID_DUMMY_V12)
__attribute__((visibility("default"))) ncclNet_v12_t ncclNetPlugin_v12 = {
    "DummyLoop12", dInit11,      dDevices,     dGetProps12,  dListen11,      dConnect11,     dAccept,
    dRegMr,        dRegMrDmaBuf, dDeregMr,     dIsend11,     dIrecv11,       dIflush,        dTest,
    dCloseSend,    dCloseRecv,   dCloseListen, dGetDeviceMr, dIrecvConsumed, dMakeVDevice12, dFinalize,
    nullptr,  // setNetAttr is optional
};
#elif !defined(BRAID_DUMMY_V10) && !defined(BRAID_DUMMY_V9)
__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    "DummyLoop", dInit,        dDevices,     dGetProps8,   dListen,        dConnect8, dAccept,
    dRegMr,      dRegMrDmaBuf, dDeregMr,     dIsend8,      dIrecv8,        dIflush,   dTest,
    dCloseSend,  dCloseRecv,   dCloseListen, dGetDeviceMr, dIrecvConsumed,
};
#elif defined(BRAID_DUMMY_V9)
__attribute__((visibility("default"))) ncclNet_v9_t ncclNetPlugin_v9 = {
    "DummyLoop9", dInit,        dDevices,     dGetProps9,   dListen,        dConnect9,     dAccept,
    dRegMr,       dRegMrDmaBuf, dDeregMr,     dIsend9,      dIrecv9,        dIflush,       dTest,
    dCloseSend,   dCloseRecv,   dCloseListen, dGetDeviceMr, dIrecvConsumed, dMakeVDevice9,
};
#else
__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = {
    "DummyLoop10", dInit10,      dDevices,     dGetProps10,  dListen,        dConnect10,   dAccept,
    dRegMr,        dRegMrDmaBuf, dDeregMr,     dIsend10,     dIrecv10,       dIflush,      dTest,
    dCloseSend,    dCloseRecv,   dCloseListen, dGetDeviceMr, dIrecvConsumed, dMakeVDevice,
};
#endif
}
