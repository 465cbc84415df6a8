#include "tests/fake_cuda/fake_cuda.h"

#include <unistd.h>

#include <cstdlib>

namespace fakecuda {

std::mutex gDoneMu;
std::condition_variable gDoneCv;
thread_local bool tlsInHostFunc = false;
thread_local Context* tlsCurrent = nullptr;

State& state() {
  static State* s = new State();  // never destroyed: calls may come during exit
  return *s;
}

bool forkedAfterInit() {
  const int pid = state().initPid.load(std::memory_order_relaxed);
  return pid != 0 && pid != static_cast<int>(getpid());
}

void waitFor(const Dep& d) {
  std::unique_lock<std::mutex> lock(gDoneMu);
  gDoneCv.wait(lock, [&] { return d.first->completed.load() >= d.second; });
}

void Stream::run() {
  for (;;) {
    Task t;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping and drained
      t = std::move(queue.front());
      queue.pop_front();
    }
    {
      // The connection's earlier tasks begin first; this one holds the later ones back until it begins.
      std::unique_lock<std::mutex> lock(conn->mu);
      conn->cv.wait(lock, [&] { return conn->begun + 1 >= t.connSeq; });
    }
    for (const Dep& d : t.deps) waitFor(d);
    {
      std::lock_guard<std::mutex> lock(conn->mu);
      conn->begun = t.connSeq;
    }
    conn->cv.notify_all();
    if (t.fn) {
      tlsInHostFunc = true;
      t.fn();
      tlsInHostFunc = false;
    }
    {
      std::lock_guard<std::mutex> lock(gDoneMu);
      completed.fetch_add(1);
    }
    gDoneCv.notify_all();
  }
}

namespace {

void parseFailures(State& s, const char* v) {
  if (v == nullptr) return;
  std::string spec = v;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) {
      std::string name = item.substr(0, eq);
      long nth = 0;
      const size_t hash = name.find('#');
      if (hash != std::string::npos) {
        nth = atol(name.c_str() + hash + 1);
        name.resize(hash);
      }
      s.fail[name] = State::Fail{nth, atoi(item.c_str() + eq + 1)};
    }
    pos = end + 1;
  }
}

}  // namespace

// The injected result of this call of `fn`, or kSuccess. Caller holds s.mu.
CUresult injected(State& s, const char* fn) {
  if (!s.failParsed) {
    s.failParsed = true;
    parseFailures(s, getenv("BRAID_FAKE_CUDA_FAIL"));
  }
  const long n = ++s.calls[fn];
  auto it = s.fail.find(fn);
  if (it == s.fail.end() || (it->second.nth != 0 && it->second.nth != n)) return kSuccess;
  return it->second.code;
}

// The start of the device allocation holding `p`, or end().
std::map<CUdeviceptr, Allocation>::iterator findAllocation(State& s, CUdeviceptr p) {
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return s.allocations.end();
  --it;
  return p < it->first + it->second.bytes ? it : s.allocations.end();
}

// The stream a handle names for the calling thread: 0 and CU_STREAM_LEGACY (1) are its context's legacy stream,
// CU_STREAM_PER_THREAD (2) the thread's per-thread default stream. Caller holds s.mu.
CUresult resolveStream(State& s, void* h, std::shared_ptr<Stream>* out) {
  if (h == reinterpret_cast<void*>(2)) {
    // CU_STREAM_PER_THREAD: this thread's own default stream on its context's device, made at first use. It
    // synchronises with the legacy stream (as a blocking stream does) and not with other streams.
    if (tlsCurrent == nullptr) return kInvalidContext;
    thread_local std::map<int, std::shared_ptr<Stream>> perThread;
    std::shared_ptr<Stream>& st = perThread[tlsCurrent->device];
    if (!st) {
      st = std::make_shared<Stream>();
      st->device = tlsCurrent->device;
      st->blocking = true;
      st->start();
      s.devices[static_cast<size_t>(st->device)].blocking.push_back(st);
    }
    *out = st;
    return kSuccess;
  }
  if (h == nullptr || h == reinterpret_cast<void*>(1)) {
    if (tlsCurrent == nullptr) return kInvalidContext;
    Device& d = s.devices[static_cast<size_t>(tlsCurrent->device)];
    if (!d.legacy) {
      d.legacy = std::make_shared<Stream>();
      d.legacy->device = tlsCurrent->device;
      d.legacy->legacy = true;
      d.legacy->blocking = false;
      d.legacy->start();
    }
    *out = d.legacy;
    return kSuccess;
  }
  auto it = s.streams.find(h);
  if (it == s.streams.end()) return kInvalidHandle;
  *out = it->second;
  return kSuccess;
}

// Queues `fn` on `st` after `deps`, with the legacy stream's rules: legacy work waits for the work queued so far on
// the device's blocking streams, and blocking streams' work waits for the legacy work queued so far. Returns what
// to wait for to see it done. Caller holds s.mu.
Dep enqueue(State& s, const std::shared_ptr<Stream>& st, std::function<void()> fn, std::vector<Dep> deps) {
  // Work issued to a capturing stream becomes a node of the graph being captured, after what the stream's last
  // node and the events it waited for lead to; the device does not see it.
  if (st->capture != 0) {
    Capture& c = *st->session;
    const int node = static_cast<int>(c.graph->nodes.size());
    c.graph->nodes.push_back(fn ? std::move(fn) : std::function<void()>([] {}));
    c.deps.push_back(c.tip[st.get()]);
    c.tip[st.get()] = {node};
    return Dep{st, st->enqueued};
  }
  Device& d = s.devices[static_cast<size_t>(st->device)];
  if (st->legacy) {
    for (auto it = d.blocking.begin(); it != d.blocking.end();) {
      if (std::shared_ptr<Stream> b = it->lock()) {
        deps.emplace_back(b, b->enqueued);
        ++it;
      } else {
        it = d.blocking.erase(it);
      }
    }
  } else if (st->blocking && d.legacy) {
    deps.emplace_back(d.legacy, d.legacy->enqueued);
  }
  if (!st->conn) {
    if (d.connections.empty()) {
      // As the driver: CUDA_DEVICE_MAX_CONNECTIONS, 1 to 32, default 8.
      const char* v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
      const long n = v != nullptr ? atol(v) : 8;
      d.connections.resize(static_cast<size_t>(n < 1 ? 1 : n > 32 ? 32 : n));
      for (auto& c : d.connections) c = std::make_shared<Connection>();
    }
    st->conn = d.connections[d.nextConnection++ % d.connections.size()];
  }
  ++st->enqueued;
  st->push(Task{std::move(fn), std::move(deps), ++st->conn->issued});
  return Dep{st, st->enqueued};
}

// A device range [p, p + n) inside one allocation, or over cuMem mappings back to back (one virtual range on a
// GPU, as the driver sees it), or host memory (not the driver's): else the range runs past the end of its
// allocation.
bool rangeOk(State& s, CUdeviceptr p, size_t n, bool mustBeDevice) {
  auto it = findAllocation(s, p);
  if (it == s.allocations.end()) return !mustBeDevice;
  if (mustBeDevice && it->second.pinned) return false;
  while (n > it->first + it->second.bytes - p) {
    const CUdeviceptr next = it->first + it->second.bytes;
    if (!it->second.vmm || it->second.multicast) return false;
    n -= static_cast<size_t>(next - p);
    p = next;
    it = s.allocations.find(next);
    if (it == s.allocations.end() || !it->second.vmm || it->second.multicast) return false;
  }
  return true;
}

bool reachableFrom(State& s, const Allocation& a, int device) {
  if (a.pinned) return true;
  if (a.vmm) return (a.accessMask >> device & 1u) != 0;
  if (a.device == device) return true;
  auto it = s.peerAccess.find({device, a.device});
  return it != s.peerAccess.end() && it->second;
}

}  // namespace fakecuda

// A test's failures from now on, in BRAID_FAKE_CUDA_FAIL's syntax ("" none), counting calls afresh: for a failure
// that must hit a call made later in a run, whatever came before it.
FAKE_API void braidFakeCudaInject(const char* spec) {
  using namespace fakecuda;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.failParsed = true;
  s.fail.clear();
  s.calls.clear();
  parseFailures(s, spec);
}
