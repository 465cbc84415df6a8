// The strict fake CUDA driver's streams, events and host functions. fake_driver.cc says what the fake models.
#include "tests/fake_cuda/fake_cuda.h"

using namespace fakecuda;

FAKE_API CUresult cuStreamCreate(void** phStream, unsigned flags) {
  FAKE_ENTER("cuStreamCreate");
  FAKE_REQUIRE_INIT();
  if (tlsCurrent == nullptr) return kInvalidContext;
  if (phStream == nullptr || flags > 1) return kInvalidValue;
  auto st = std::make_shared<Stream>();
  st->device = tlsCurrent->device;
  st->blocking = flags == 0;
  st->start();
  s.streams[st.get()] = st;
  if (st->blocking) s.devices[static_cast<size_t>(st->device)].blocking.push_back(st);
  *phStream = st.get();
  return kSuccess;
}

FAKE_API CUresult cuStreamDestroy_v2(void* h) {
  FAKE_ENTER("cuStreamDestroy");
  FAKE_REQUIRE_INIT();
  auto it = s.streams.find(h);
  if (it == s.streams.end()) return kInvalidHandle;  // the legacy stream, or not a stream
  // As the driver: returns at once; queued work still runs, then the stream goes.
  it->second->stop();
  s.streams.erase(it);
  return kSuccess;
}

FAKE_API CUresult cuStreamSynchronize(void* h) {
  FAKE_ENTER("cuStreamSynchronize");
  FAKE_REQUIRE_INIT();
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, h, &st); r != kSuccess) return r;
  if (st->capture != 0) {
    st->session->invalidated = true;  // not allowed while capturing: the capture is invalidated
    return kCaptureUnsupported;
  }
  const Dep done = enqueue(s, st, nullptr);  // on the legacy stream this also waits for the blocking streams
  lock.unlock();
  waitFor(done);
  return s.devices[static_cast<size_t>(st->device)].sticky->load();  // a kernel that failed says so here
}

FAKE_API CUresult cuStreamQuery(void* h) {
  FAKE_ENTER("cuStreamQuery");
  FAKE_REQUIRE_INIT();
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, h, &st); r != kSuccess) return r;
  if (st->capture != 0) {
    st->session->invalidated = true;  // not allowed while capturing, as synchronising
    return kCaptureUnsupported;
  }
  if (CUresult sticky = s.devices[static_cast<size_t>(st->device)].sticky->load(); sticky != kSuccess) return sticky;
  bool idle = st->completed.load() >= st->enqueued;
  if (st->legacy) {
    for (auto& w : s.devices[static_cast<size_t>(st->device)].blocking) {
      if (std::shared_ptr<Stream> b = w.lock()) idle = idle && b->completed.load() >= b->enqueued;
    }
  }
  return idle ? kSuccess : kNotReady;
}

// The special handles (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) answer the calling thread's context; a created
// stream, its device's (primary) context. An unknown handle is undefined behaviour in the driver; here it fails.
FAKE_API CUresult cuStreamGetCtx(void* h, void** pctx) {
  FAKE_ENTER("cuStreamGetCtx");
  FAKE_REQUIRE_INIT();
  if (pctx == nullptr) return kInvalidValue;
  if (h == nullptr || h == reinterpret_cast<void*>(1) || h == reinterpret_cast<void*>(2)) {
    if (tlsCurrent == nullptr) return kInvalidContext;
    *pctx = tlsCurrent;
    return kSuccess;
  }
  auto it = s.streams.find(h);
  if (it == s.streams.end()) return kInvalidHandle;
  *pctx = &s.devices[static_cast<size_t>(it->second->device)].primary;
  return kSuccess;
}

FAKE_API CUresult cuEventCreate(void** phEvent, unsigned flags) {
  FAKE_ENTER("cuEventCreate");
  FAKE_REQUIRE_INIT();
  if (tlsCurrent == nullptr) return kInvalidContext;
  // CU_EVENT_BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4 (which requires DISABLE_TIMING).
  if (phEvent == nullptr || (flags & ~7u) != 0 || ((flags & 4u) != 0 && (flags & 2u) == 0)) return kInvalidValue;
  auto ev = std::make_unique<Event>();
  *phEvent = ev.get();
  s.events[ev.get()] = std::move(ev);
  return kSuccess;
}

FAKE_API CUresult cuEventDestroy_v2(void* h) {
  FAKE_ENTER("cuEventDestroy");
  FAKE_REQUIRE_INIT();
  return s.events.erase(h) == 1 ? kSuccess : kInvalidHandle;
}

FAKE_API CUresult cuEventRecord(void* hEvent, void* hStream) {
  FAKE_ENTER("cuEventRecord");
  FAKE_REQUIRE_INIT();
  FAKE_REQUIRE_HEALTHY();
  auto ev = s.events.find(hEvent);
  if (ev == s.events.end()) return kInvalidHandle;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, hStream, &st); r != kSuccess) return r;
  Event& e = *ev->second;
  if (st->capture != 0) {
    // Inside a capture the event stands for the stream's last node: a stream that waits for it joins the capture.
    e.stream.reset();
    e.session = st->session;
    e.tip = st->session->tip[st.get()];
    return kSuccess;
  }
  const Dep at = enqueue(s, st, nullptr);
  e.stream = at.first;
  e.seq = at.second;
  e.session.reset();
  return kSuccess;
}

FAKE_API CUresult cuEventQuery(void* hEvent) {
  FAKE_ENTER("cuEventQuery");
  FAKE_REQUIRE_INIT();
  auto ev = s.events.find(hEvent);
  if (ev == s.events.end()) return kInvalidHandle;
  const Event& e = *ev->second;
  return !e.stream || e.stream->completed.load() >= e.seq ? kSuccess : kNotReady;  // never recorded: complete
}

FAKE_API CUresult cuEventSynchronize(void* hEvent) {
  FAKE_ENTER("cuEventSynchronize");
  FAKE_REQUIRE_INIT();
  auto ev = s.events.find(hEvent);
  if (ev == s.events.end()) return kInvalidHandle;
  if (!ev->second->stream) return kSuccess;
  const Dep done{ev->second->stream, ev->second->seq};
  lock.unlock();
  waitFor(done);
  return s.devices[static_cast<size_t>(done.first->device)].sticky->load();
}

FAKE_API CUresult cuStreamWaitEvent(void* hStream, void* hEvent, unsigned flags) {
  FAKE_ENTER("cuStreamWaitEvent");
  FAKE_REQUIRE_INIT();
  if (flags > 1) return kInvalidValue;  // CU_EVENT_WAIT_DEFAULT 0, CU_EVENT_WAIT_EXTERNAL 1
  auto ev = s.events.find(hEvent);
  if (ev == s.events.end()) return kInvalidHandle;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, hStream, &st); r != kSuccess) return r;
  Event& e = *ev->second;
  if (e.session || st->capture != 0) return captureWait(s, st, e);
  std::vector<Dep> deps;
  if (e.stream) deps.emplace_back(e.stream, e.seq);
  enqueue(s, st, nullptr, std::move(deps));
  return kSuccess;
}

FAKE_API CUresult cuLaunchHostFunc(void* hStream, void (*fn)(void*), void* userData) {
  FAKE_ENTER("cuLaunchHostFunc");
  FAKE_REQUIRE_INIT();
  FAKE_REQUIRE_HEALTHY();
  if (fn == nullptr) return kInvalidValue;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, hStream, &st); r != kSuccess) return r;
  enqueue(s, st, [fn, userData] { fn(userData); });
  return kSuccess;
}

// Waits for everything queued on the current context's device: its legacy stream and every created stream.
FAKE_API CUresult cuCtxSynchronize() {
  FAKE_ENTER("cuCtxSynchronize");
  FAKE_REQUIRE_INIT();
  if (tlsCurrent == nullptr) return kInvalidContext;
  const int device = tlsCurrent->device;
  std::vector<Dep> pending;
  std::shared_ptr<Stream> legacy;
  if (CUresult r = resolveStream(s, nullptr, &legacy); r != kSuccess) return r;
  pending.push_back(enqueue(s, legacy, nullptr));  // the legacy stream also waits for the blocking streams
  for (auto& kv : s.streams) {
    if (kv.second->device == device) pending.emplace_back(kv.second, kv.second->enqueued);
  }
  lock.unlock();
  for (const Dep& d : pending) waitFor(d);
  return s.devices[static_cast<size_t>(device)].sticky->load();
}
