// The strict fake CUDA driver's stream capture and graphs, as braid's CUDA communicators and their tests use them.
//
// Capture: work issued to a capturing stream becomes a node of the capture's graph instead of running (the
// legacy stream cannot capture: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). An event recorded in a capture stands
// for the stream's last node; another stream that waits for it joins the capture, and a capturing stream may not
// wait for work outside it (CUDA_ERROR_STREAM_CAPTURE_ISOLATION). Synchronising or querying a capturing stream
// fails and invalidates the capture, which cuStreamEndCapture then reports (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED).
// cuStreamEndCapture must be called on the stream that began the capture (CUDA_ERROR_STREAM_CAPTURE_UNMATCHED),
// and every node must lead back to that stream (else CUDA_ERROR_STREAM_CAPTURE_UNJOINED): a library that forks
// work onto its own stream must join it back. The capture interaction modes are the driver's: while a capture
// forbids it, an allocation or free from a thread whose mode is not relaxed fails and invalidates the capture.
//
// Graphs: instantiating copies the nodes; a launch runs them in capture order (a valid order of the captured
// dependencies) as one piece of work on the stream. User objects: references held by the caller, a graph and its
// executable graphs; at zero the destructor runs on a thread of its own (where CUDA calls fail), after the
// launches of a destroyed executable graph are done.
#include <algorithm>

#include "tests/fake_cuda/fake_cuda.h"

using namespace fakecuda;

namespace {

constexpr int kModeGlobal = 0, kModeThreadLocal = 1, kModeRelaxed = 2;
constexpr CUresult kCaptureUnmatched = 903, kCaptureUnjoined = 904, kCaptureIsolation = 905;

thread_local int tlsCaptureMode = kModeGlobal;

void endSession(State& s, const std::shared_ptr<Capture>& c) {
  for (auto& kv : s.streams) {
    if (kv.second->session == c) {
      kv.second->capture = 0;
      kv.second->session.reset();
    }
  }
  s.captures.erase(std::remove(s.captures.begin(), s.captures.end(), c), s.captures.end());
}

// Whether `graph` is one a capture is still building (neither instantiated nor destroyed until it ends).
bool beingCaptured(const State& s, const void* graph) {
  for (const auto& c : s.captures) {
    if (c->graph == graph) return true;
  }
  return false;
}

void dropGraph(State& s, Graph* g) {
  for (auto& [o, n] : g->owned) releaseUserObject(s, o, n);
  s.graphs.erase(g);
}

}  // namespace

namespace fakecuda {

CUresult captureForbids(State& s) {
  if (tlsCaptureMode == kModeRelaxed) return kSuccess;
  const std::thread::id me = std::this_thread::get_id();
  bool forbidden = false;
  for (const auto& c : s.captures) {
    const bool mine = c->thread == me && c->mode != kModeRelaxed;
    const bool otherGlobal = c->thread != me && c->mode == kModeGlobal && tlsCaptureMode == kModeGlobal;
    if (mine || otherGlobal) {
      c->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden ? kCaptureUnsupported : kSuccess;
}

CUresult captureWait(State& s, const std::shared_ptr<Stream>& st, const Event& e) {
  if (!e.session) {  // a capturing stream waiting for work outside its capture
    st->session->invalidated = true;
    return kCaptureIsolation;
  }
  if (st->capture != 0 && st->session != e.session) {
    st->session->invalidated = true;
    return kCaptureIsolation;
  }
  if (st->capture == 0) {
    if (st->legacy) return kCaptureUnsupported;
    st->capture = 1;
    st->session = e.session;
  }
  std::vector<int>& tip = e.session->tip[st.get()];
  for (int n : e.tip) {
    if (std::find(tip.begin(), tip.end(), n) == tip.end()) tip.push_back(n);
  }
  return kSuccess;
}

void releaseUserObject(State& s, UserObject* o, unsigned n, std::vector<Dep> after) {
  o->refs = o->refs > n ? o->refs - n : 0;
  if (o->refs != 0) return;
  void* ptr = o->ptr;
  void (*destroy)(void*) = o->destroy;
  s.userObjects.erase(o);
  std::thread([ptr, destroy, after] {
    for (const Dep& d : after) waitFor(d);
    tlsInHostFunc = true;  // no CUDA calls from a destructor
    destroy(ptr);
  }).detach();
}

}  // namespace fakecuda

FAKE_API CUresult cuStreamBeginCapture_v2(void* h, int mode) {
  FAKE_ENTER("cuStreamBeginCapture");
  FAKE_REQUIRE_INIT();
  if (mode < kModeGlobal || mode > kModeRelaxed) return kInvalidValue;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, h, &st); r != kSuccess) return r;
  if (st->legacy) return kCaptureUnsupported;
  if (st->capture != 0) return kIllegalState;
  auto c = std::make_shared<Capture>();
  c->id = s.nextCaptureId++;
  auto g = std::make_unique<Graph>();
  c->graph = g.get();
  s.graphs[g.get()] = std::move(g);
  c->origin = st.get();
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  st->capture = 1;
  st->session = c;
  s.captures.push_back(c);
  return kSuccess;
}

FAKE_API CUresult cuStreamEndCapture(void* h, void** graph) {
  FAKE_ENTER("cuStreamEndCapture");
  FAKE_REQUIRE_INIT();
  if (graph == nullptr) return kInvalidValue;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, h, &st); r != kSuccess) return r;
  if (st->capture == 0) return kIllegalState;
  std::shared_ptr<Capture> c = st->session;
  if (c->origin != st.get()) {
    c->invalidated = true;
    return kCaptureUnmatched;
  }
  endSession(s, c);
  *graph = nullptr;
  if (c->invalidated) {
    dropGraph(s, c->graph);
    return kCaptureInvalidated;
  }
  // Every node must be reachable backwards from the origin stream's last nodes.
  std::vector<bool> seen(c->deps.size(), false);
  std::vector<int> todo = c->tip[st.get()];
  while (!todo.empty()) {
    const int n = todo.back();
    todo.pop_back();
    if (seen[static_cast<size_t>(n)]) continue;
    seen[static_cast<size_t>(n)] = true;
    for (int d : c->deps[static_cast<size_t>(n)]) todo.push_back(d);
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
    dropGraph(s, c->graph);
    return kCaptureUnjoined;
  }
  *graph = c->graph;
  return kSuccess;
}

FAKE_API CUresult cuStreamIsCapturing(void* h, int* status) {
  FAKE_ENTER("cuStreamIsCapturing");
  FAKE_REQUIRE_INIT();
  if (status == nullptr) return kInvalidValue;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, h, &st); r != kSuccess) return r;
  *status = st->capture == 0 ? 0 : st->session->invalidated ? 2 : 1;
  return kSuccess;
}

// CUDA 12.0's form (cuStreamGetCaptureInfo_v2): status, capture id, the graph being captured; no dependencies are
// reported (braid asks for none).
FAKE_API CUresult cuStreamGetCaptureInfo_v2(void* h, int* status, unsigned long long* id, void** graph,
                                            const void** deps, size_t* numDeps) {
  FAKE_ENTER("cuStreamGetCaptureInfo");
  FAKE_REQUIRE_INIT();
  if (status == nullptr) return kInvalidValue;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, h, &st); r != kSuccess) return r;
  *status = st->capture == 0 ? 0 : st->session->invalidated ? 2 : 1;
  if (id != nullptr) *id = st->capture != 0 ? st->session->id : 0;
  if (graph != nullptr) *graph = st->capture != 0 ? st->session->graph : nullptr;
  if (deps != nullptr) *deps = nullptr;
  if (numDeps != nullptr) *numDeps = 0;
  return kSuccess;
}

FAKE_API CUresult cuThreadExchangeStreamCaptureMode(int* mode) {
  if (mode == nullptr || *mode < kModeGlobal || *mode > kModeRelaxed) return kInvalidValue;
  std::swap(*mode, tlsCaptureMode);
  return kSuccess;
}

FAKE_API CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags) {
  FAKE_ENTER("cuGraphInstantiate");
  FAKE_REQUIRE_INIT();
  if (exec == nullptr || flags != 0) return kInvalidValue;
  auto g = s.graphs.find(graph);
  if (g == s.graphs.end()) return kInvalidValue;
  if (beingCaptured(s, graph)) return kInvalidValue;
  auto e = std::make_unique<GraphExec>();
  e->nodes = g->second->nodes;
  e->owned = g->second->owned;
  for (auto& [o, n] : e->owned) o->refs += n;
  *exec = e.get();
  s.execs[e.get()] = std::move(e);
  return kSuccess;
}

FAKE_API CUresult cuGraphLaunch(void* exec, void* hStream) {
  FAKE_ENTER("cuGraphLaunch");
  FAKE_REQUIRE_INIT();
  FAKE_REQUIRE_HEALTHY();
  auto e = s.execs.find(exec);
  if (e == s.execs.end()) return kInvalidValue;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, hStream, &st); r != kSuccess) return r;
  if (st->capture != 0) return kNotSupported;  // a graph as a node of another: not modelled
  std::vector<std::function<void()>> nodes = e->second->nodes;
  const Dep done = enqueue(s, st, [nodes] {
    for (const auto& n : nodes) n();
  });
  auto& launches = e->second->launches;
  launches.erase(std::remove_if(launches.begin(), launches.end(), [&](const Dep& d) { return d.first == st; }),
                 launches.end());
  launches.push_back(done);
  return kSuccess;
}

FAKE_API CUresult cuGraphExecDestroy(void* exec) {
  FAKE_ENTER("cuGraphExecDestroy");
  FAKE_REQUIRE_INIT();
  auto e = s.execs.find(exec);
  if (e == s.execs.end()) return kInvalidValue;
  // As the driver: launches still running finish; what they use is released after them.
  for (auto& [o, n] : e->second->owned) releaseUserObject(s, o, n, e->second->launches);
  s.execs.erase(e);
  return kSuccess;
}

FAKE_API CUresult cuGraphDestroy(void* graph) {
  FAKE_ENTER("cuGraphDestroy");
  FAKE_REQUIRE_INIT();
  auto g = s.graphs.find(graph);
  if (g == s.graphs.end()) return kInvalidValue;
  if (beingCaptured(s, graph)) return kInvalidValue;
  dropGraph(s, g->second.get());
  return kSuccess;
}

FAKE_API CUresult cuUserObjectCreate(void** object, void* ptr, void (*destroy)(void*), unsigned initialRefcount,
                                     unsigned flags) {
  FAKE_ENTER("cuUserObjectCreate");
  FAKE_REQUIRE_INIT();
  // CU_USER_OBJECT_NO_DESTRUCTOR_SYNC is required.
  if (object == nullptr || destroy == nullptr || initialRefcount == 0 || flags != 1) return kInvalidValue;
  auto o = std::make_unique<UserObject>(UserObject{ptr, destroy, initialRefcount});
  *object = o.get();
  s.userObjects[o.get()] = std::move(o);
  return kSuccess;
}

FAKE_API CUresult cuUserObjectRelease(void* object, unsigned count) {
  FAKE_ENTER("cuUserObjectRelease");
  FAKE_REQUIRE_INIT();
  auto o = s.userObjects.find(object);
  if (o == s.userObjects.end() || count == 0 || count > o->second->refs) return kInvalidValue;
  releaseUserObject(s, o->second.get(), count);
  return kSuccess;
}

// flags: CU_GRAPH_USER_OBJECT_MOVE (1) transfers the caller's references instead of adding new ones.
FAKE_API CUresult cuGraphRetainUserObject(void* graph, void* object, unsigned count, unsigned flags) {
  FAKE_ENTER("cuGraphRetainUserObject");
  FAKE_REQUIRE_INIT();
  auto g = s.graphs.find(graph);
  auto o = s.userObjects.find(object);
  if (g == s.graphs.end() || o == s.userObjects.end() || count == 0 || flags > 1) return kInvalidValue;
  if (flags == 1 && count > o->second->refs) return kInvalidValue;
  if (flags == 0) o->second->refs += count;
  g->second->owned.emplace_back(o->second.get(), count);
  return kSuccess;
}
