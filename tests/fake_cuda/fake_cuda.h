// The strict fake CUDA driver's shared state (tests/fake_cuda/): devices, contexts, allocations, streams and
// events, the failure injection, and the entry points (fake_driver.cc: init, devices, contexts, errors,
// cuGetProcAddress; fake_memory.cc: memory; fake_streams.cc: streams, events, host functions). fake_driver.cc says
// what it models.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fakecuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kNotInitialized = 3, kNoDevice = 100,
                   kInvalidDevice = 101, kInvalidImage = 200, kInvalidContext = 201, kNoBinaryForGpu = 209,
                   kInvalidHandle = 400, kIllegalState = 401, kNotFound = 500, kNotReady = 600, kLaunchFailed = 719,
                   kNotPermitted = 800, kNotSupported = 801, kCaptureUnsupported = 900, kCaptureInvalidated = 901;
constexpr int kDriverVersion = 13000;
constexpr size_t kRegionBytes = size_t{1} << 32;  // address space reserved per device (not memory)
constexpr size_t kAlign = 256;                    // cuMemAlloc's alignment
constexpr unsigned char kPoison = 0xDB;
constexpr size_t kGranularity = size_t{2} << 20;  // VMM and multicast granularity (2 MiB, as on Hopper)
constexpr int kHandleTypeFd = 1;                  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

struct Context {
  int device;
  int refs = 0;
};

struct Allocation {
  size_t bytes;
  unsigned long long bufferId;
  int device;
  bool pinned = false;      // page-locked host memory (cuMemHostAlloc), mapped: its device address is its host address
  bool registered = false;  // pinned by cuMemHostRegister: the program's memory, unregistered (not freed) at the end
  // A cuMemMap mapping (fake_vmm.cc): of physical memory `handle` on `device`, reachable from the devices in
  // accessMask (cuMemSetAccess); cuMemFree refuses it.
  bool vmm = false;
  unsigned long long handle = 0;
  unsigned accessMask = 0;
  // A mapping of a multicast object (fake_multicast.cc): its pages stay inaccessible to plain loads and stores
  // (only the emulator's multimem operations reach the bound buffers); mcOffset is where it starts in the object.
  bool multicast = false;
  size_t mcOffset = 0;
};

// A multicast object (fake_multicast.cc): its devices (all must be added before any bind or map), the memory each
// bound, and the order its emulated switch combines them (a permutation seeded per object).
struct McBinding {
  int device;
  CUdeviceptr uc;  // this process's address of the bound memory
  size_t mcOffset;
  size_t bytes;
};
struct Multicast {
  unsigned numDevices = 0;
  size_t size = 0;
  bool exportable = false;  // created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
  std::vector<int> devices;
  std::vector<McBinding> bindings;
  std::vector<int> order;  // a permutation of 0..numDevices-1: device slots in the order they are combined
  int mappings = 0;
  bool released = false;
};

// Physical memory from cuMemCreate or cuMemImportFromShareableHandle (fake_vmm.cc): a memfd, so another process
// can map the same pages after it receives the exported descriptor.
struct PhysMem {
  int fd = -1;
  size_t bytes = 0;
  int device = 0;
  bool exportable = false;  // created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
  int mappings = 0;
  int refs = 1;           // handle references: cuMemCreate's or the import's, plus cuMemRetainAllocationHandle's
  bool released = false;  // the last reference was released: gone when the last mapping is unmapped
};

// Completion of stream work, for everything that waits on it (events, stream waits, synchronisation).
extern std::mutex gDoneMu;
extern std::condition_variable gDoneCv;

struct Stream;
struct Capture;
using Dep = std::pair<std::shared_ptr<Stream>, uint64_t>;  // wait until that stream has completed that many tasks

struct Task {
  std::function<void()> fn;
  std::vector<Dep> deps;
  uint64_t connSeq = 0;  // its place on its stream's connection
};

// A hardware work queue of a device (CUDA_DEVICE_MAX_CONNECTIONS of them, default 8): streams share them round-robin,
// and a connection starts its tasks in the order they were issued, whichever stream they came from. A task begins
// when every earlier task of its connection began and its own dependencies (its stream's previous task included)
// are met, so a task waiting at the head holds back every stream behind it on the connection: the false
// serialisation that deadlocks kernels of ranks sharing a GPU when their streams outnumber the connections.
struct Connection {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t issued = 0;  // under the state's mutex
  uint64_t begun = 0;   // under mu
};

// One stream: its tasks run in order on its own thread.
struct Stream : std::enable_shared_from_this<Stream> {
  int device = 0;
  bool blocking = true;  // synchronises with the legacy NULL stream
  bool legacy = false;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task> queue;
  uint64_t enqueued = 0;  // under the state's mutex
  std::atomic<uint64_t> completed{0};
  bool stopping = false;
  int capture = 0;                   // CUstreamCaptureStatus: 0 none, 1 active, 2 invalidated (under the state's mutex)
  std::shared_ptr<Capture> session;  // the capture this stream takes part in (fake_graphs.cc)
  std::shared_ptr<Connection> conn;  // its device's connection, from its first task (under the state's mutex)

  void start() {
    std::shared_ptr<Stream> self = shared_from_this();
    std::thread([self] { self->run(); }).detach();  // lives until destroyed and drained
  }
  void push(Task t) {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(t));
    cv.notify_one();
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    cv.notify_one();
  }
  void run();
};

// Blocks until that stream has completed that many tasks.
void waitFor(const Dep& d);

extern thread_local bool tlsInHostFunc;  // inside a host function, where CUDA calls are refused

struct Event {
  std::shared_ptr<Stream> stream;  // null until recorded
  uint64_t seq = 0;
  // Recorded in a capture: the capture and the nodes a wait on it depends on.
  std::shared_ptr<Capture> session;
  std::vector<int> tip;
};

// Graphs (fake_graphs.cc). A user object lives until its references are released; its destructor runs on a
// thread of its own, where CUDA calls fail (the driver forbids them there).
struct UserObject {
  void* ptr;
  void (*destroy)(void*);
  unsigned refs;
};
struct Graph {
  std::vector<std::function<void()>> nodes;             // in capture order: a topological order of the captured work
  std::vector<std::pair<UserObject*, unsigned>> owned;  // references the graph holds
};
struct GraphExec {
  std::vector<std::function<void()>> nodes;
  std::vector<std::pair<UserObject*, unsigned>> owned;
  std::vector<Dep> launches;  // the last launch on each stream it was launched on
};
// One capture sequence: the streams that joined it, what each one's next node depends on, and each node's
// dependencies (to find work that was never joined back into the origin stream).
struct Capture {
  uint64_t id = 0;
  Graph* graph = nullptr;
  Stream* origin = nullptr;
  int mode = 0;            // CUstreamCaptureMode it began with
  std::thread::id thread;  // the thread that began it
  std::map<Stream*, std::vector<int>> tip;
  std::vector<std::vector<int>> deps;
  bool invalidated = false;
};

struct Device {
  // A kernel failed (the emulator found a deadlock, a divergent barrier, ...): as after a trap on a GPU, the
  // context's later calls fail with this (CUDA_ERROR_LAUNCH_FAILED) for the rest of the process.
  std::shared_ptr<std::atomic<CUresult>> sticky = std::make_shared<std::atomic<CUresult>>(0);
  std::shared_ptr<Stream> legacy;               // the NULL stream, made at first use
  std::vector<std::weak_ptr<Stream>> blocking;  // streams created without CU_STREAM_NON_BLOCKING
  char* base = nullptr;
  size_t used = 0;
  Context primary{0};
  std::vector<std::pair<CUdeviceptr, size_t>> freed;     // last freed at the back
  std::vector<std::shared_ptr<Connection>> connections;  // CUDA_DEVICE_MAX_CONNECTIONS, made at first use
  size_t nextConnection = 0;                             // the next stream's, round-robin
};

// Loaded modules (fake_kernels.cc): only the emulator's host image (src/backends/cuda/emu/emu_image.h) runs here.
struct Library {
  const void* image;  // a braid::EmuImage
};
struct Kernel {
  Library* library;
  uint32_t index;
};
struct Function {
  Kernel* kernel;
  int device;
};

struct State {
  std::mutex mu;
  bool initialized = false;
  std::atomic<int> initPid{0};  // the process that called cuInit: a child forked after it cannot use CUDA
  int count = 0;
  std::vector<Device> devices;
  std::map<CUdeviceptr, Allocation> allocations;     // by start address
  std::map<void*, std::shared_ptr<Stream>> streams;  // live created streams, by handle
  std::map<void*, std::unique_ptr<Event>> events;
  std::map<void*, std::unique_ptr<Library>> libraries;
  std::map<void*, std::unique_ptr<Kernel>> kernels;      // one per (library, name)
  std::map<void*, std::unique_ptr<Function>> functions;  // one per (kernel, device)
  unsigned long long nextBufferId = 1;
  std::map<unsigned long long, PhysMem> phys;         // cuMem handles
  std::map<unsigned long long, Multicast> multicast;  // multicast handles (the same numbering as phys)
  uint64_t multicastCreated = 0;                      // for the seeded order
  unsigned long long nextHandle = 1;
  std::map<CUdeviceptr, size_t> reserved;          // cuMemAddressReserve ranges
  std::map<std::pair<int, int>, bool> peerAccess;  // (device of the context, peer device): enabled
  std::map<void*, std::unique_ptr<Graph>> graphs;
  std::map<void*, std::unique_ptr<GraphExec>> execs;
  std::map<void*, std::unique_ptr<UserObject>> userObjects;
  std::vector<std::shared_ptr<Capture>> captures;  // active capture sequences
  uint64_t nextCaptureId = 1;
  // Failure injection: per function, the call that fails (0: every call) and its result; and the calls so far.
  struct Fail {
    long nth;
    CUresult code;
  };
  std::map<std::string, Fail> fail;
  std::map<std::string, long> calls;
  bool failParsed = false;
};

State& state();  // the process's one state

extern thread_local Context* tlsCurrent;  // the calling thread's current context

// Whether this process is a child forked after its parent initialised CUDA (checked before the state's lock, which
// another thread of the parent may have held at the fork).
bool forkedAfterInit();

// The state's helpers (fake_state.cc). Callers hold s.mu.
CUresult injected(State& s, const char* fn);  // the injected result of this call of fn, or kSuccess
// The allocation holding p, or s.allocations.end().
std::map<CUdeviceptr, Allocation>::iterator findAllocation(State& s, CUdeviceptr p);
// The stream a handle names for the calling thread: 0 and CU_STREAM_LEGACY (1) are its context's legacy stream,
// CU_STREAM_PER_THREAD (2) the thread's per-thread default stream (blocking with respect to the legacy stream).
CUresult resolveStream(State& s, void* h, std::shared_ptr<Stream>* out);
// Queues fn on st after deps, with the legacy stream's rules; returns what to wait for to see it done.
Dep enqueue(State& s, const std::shared_ptr<Stream>& st, std::function<void()> fn, std::vector<Dep> deps = {});
// [p, p + n) inside one allocation, or host memory when !mustBeDevice.
bool rangeOk(State& s, CUdeviceptr p, size_t n, bool mustBeDevice);
// Resident CTA slots per device, which is also its SM count (BRAID_FAKE_CUDA_SM_SLOTS, default 132).
int residentSlots();
// A "potentially unsafe" call (allocation, freeing) from this thread while a capture forbids it (the driver's
// stream capture interaction modes): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated.
CUresult captureForbids(State& s);
// cuStreamWaitEvent where the event was recorded in a capture or the stream is capturing: joins the stream to the
// event's capture, or refuses a wait that crosses a capture's boundary (CUDA_ERROR_STREAM_CAPTURE_ISOLATION).
CUresult captureWait(State& s, const std::shared_ptr<Stream>& st, const Event& e);
// Drops `n` references to `o`; at zero its destructor runs on a thread of its own (after `after`, when given).
void releaseUserObject(State& s, UserObject* o, unsigned n, std::vector<Dep> after = {});
// Whether a kernel on `device` may touch allocation `a`: its own device's memory, pinned host memory, another
// device's after cuCtxEnablePeerAccess, a cuMem mapping the device was given access to.
bool reachableFrom(State& s, const Allocation& a, int device);
// Multicast objects in cuMemMap/cuMemUnmap/cuMemRelease (fake_multicast.cc). Callers hold s.mu.
CUresult mapMulticast(State& s, CUdeviceptr ptr, size_t bytes, size_t offset, unsigned long long handle);
void unmapMulticast(State& s, const Allocation& a);
bool releaseMulticast(State& s, unsigned long long handle, CUresult* result);  // false: not a multicast handle
bool noMulticast();                                                            // BRAID_FAKE_CUDA_NO_MULTICAST=1
// The emulator's hook (emu_image.h's EmuMulticastFn).
int resolveMulticast(const void* mc, size_t bytes, int device, void** uc, int max);

// Every entry point: no CUDA call from a host function (the driver's rule), none from a child forked after cuInit
// (CUDA does not survive fork), the failure injection, the state lock.
#define FAKE_ENTER(name)                                   \
  if (tlsInHostFunc) return kNotPermitted;                 \
  if (forkedAfterInit()) return kNotInitialized;           \
  State& s = state();                                      \
  std::unique_lock<std::mutex> lock(s.mu);                 \
  if (CUresult inj = injected(s, name); inj != kSuccess) { \
    return inj;                                            \
  }
#define FAKE_REQUIRE_INIT() \
  if (!s.initialized) return kNotInitialized
// The calling thread's context has not seen a failed kernel (Device::sticky).
#define FAKE_REQUIRE_HEALTHY()                                                                                      \
  if (tlsCurrent != nullptr) {                                                                                      \
    if (CUresult st = s.devices[static_cast<size_t>(tlsCurrent->device)].sticky->load(); st != kSuccess) return st; \
  }

}  // namespace fakecuda

// The entry points, exported by name (and through cuGetProcAddress).
#define FAKE_API extern "C" __attribute__((visibility("default")))
using fakecuda::CUdevice;
using fakecuda::CUdeviceptr;
using fakecuda::CUresult;
FAKE_API CUresult cuGetErrorName(CUresult error, const char** pStr);
FAKE_API CUresult cuGetErrorString(CUresult error, const char** pStr);
FAKE_API CUresult cuDriverGetVersion(int* version);
FAKE_API CUresult cuInit(unsigned flags);
FAKE_API CUresult cuDeviceGetCount(int* count);
FAKE_API CUresult cuDeviceGet(CUdevice* device, int ordinal);
FAKE_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev);
FAKE_API CUresult cuDeviceGetAttribute(int* value, int attrib, CUdevice dev);
FAKE_API CUresult cuDevicePrimaryCtxRetain(void** pctx, CUdevice dev);
FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
FAKE_API CUresult cuCtxGetCurrent(void** pctx);
FAKE_API CUresult cuCtxSetCurrent(void* ctx);
FAKE_API CUresult cuCtxGetDevice(CUdevice* device);
FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes);
FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr);
FAKE_API CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr);
FAKE_API CUresult cuStreamCreate(void** phStream, unsigned flags);
FAKE_API CUresult cuStreamDestroy_v2(void* h);
FAKE_API CUresult cuStreamSynchronize(void* h);
FAKE_API CUresult cuStreamQuery(void* h);
FAKE_API CUresult cuCtxSynchronize();
FAKE_API CUresult cuStreamBeginCapture_v2(void* h, int mode);
FAKE_API CUresult cuStreamEndCapture(void* h, void** graph);
FAKE_API CUresult cuStreamIsCapturing(void* h, int* status);
FAKE_API CUresult cuStreamGetCtx(void* h, void** pctx);
FAKE_API CUresult cuEventCreate(void** phEvent, unsigned flags);
FAKE_API CUresult cuEventDestroy_v2(void* h);
FAKE_API CUresult cuEventRecord(void* hEvent, void* hStream);
FAKE_API CUresult cuEventQuery(void* hEvent);
FAKE_API CUresult cuEventSynchronize(void* hEvent);
FAKE_API CUresult cuStreamWaitEvent(void* hStream, void* hEvent, unsigned flags);
FAKE_API CUresult cuLaunchHostFunc(void* hStream, void (*fn)(void*), void* userData);
FAKE_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void* hStream);
FAKE_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, void* hStream);
FAKE_API CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned flags);
FAKE_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned flags);
FAKE_API CUresult cuMemFreeHost(void* p);
FAKE_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned flags);
FAKE_API CUresult cuMemHostUnregister(void* p);
FAKE_API CUresult cuLibraryLoadData(void** library, const void* code, void* jitOptions, void** jitOptionValues,
                                    unsigned numJitOptions, void* libraryOptions, void** libraryOptionValues,
                                    unsigned numLibraryOptions);
FAKE_API CUresult cuLibraryUnload(void* library);
FAKE_API CUresult cuLibraryGetKernel(void** kernel, void* library, const char* name);
FAKE_API CUresult cuKernelGetFunction(void** func, void* kernel);
FAKE_API CUresult cuLaunchKernel(void* f, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                                 unsigned blockY, unsigned blockZ, unsigned sharedMemBytes, void* hStream,
                                 void** kernelParams, void** extra);
FAKE_API CUresult cuDeviceCanAccessPeer(int* canAccess, CUdevice dev, CUdevice peer);
FAKE_API CUresult cuDeviceGetP2PAttribute(int* value, int attrib, CUdevice src, CUdevice dst);
FAKE_API CUresult cuCtxEnablePeerAccess(void* peerCtx, unsigned flags);
FAKE_API CUresult cuCtxDisablePeerAccess(void* peerCtx);
FAKE_API CUresult cuMemGetAllocationGranularity(size_t* granularity, const void* prop, int option);
FAKE_API CUresult cuMemCreate(unsigned long long* handle, size_t bytes, const void* prop, unsigned long long flags);
FAKE_API CUresult cuMemRelease(unsigned long long handle);
FAKE_API CUresult cuMemExportToShareableHandle(void* out, unsigned long long handle, int type,
                                               unsigned long long flags);
FAKE_API CUresult cuMemImportFromShareableHandle(unsigned long long* handle, void* osHandle, int type);
FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
FAKE_API CUresult cuMemRetainAllocationHandle(unsigned long long* handle, void* addr);
FAKE_API CUresult cuMemGetAllocationPropertiesFromHandle(void* prop, unsigned long long handle);
FAKE_API CUresult cuMemGetAccess(unsigned long long* flags, const void* location, CUdeviceptr ptr);
FAKE_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t bytes, size_t align, CUdeviceptr addr,
                                      unsigned long long flags);
FAKE_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t bytes);
FAKE_API CUresult cuMemMap(CUdeviceptr ptr, size_t bytes, size_t offset, unsigned long long handle,
                           unsigned long long flags);
FAKE_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t bytes);
FAKE_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t bytes, const void* desc, size_t count);
FAKE_API CUresult cuStreamGetCaptureInfo_v2(void* h, int* status, unsigned long long* id, void** graph,
                                            const void** deps, size_t* numDeps);
FAKE_API CUresult cuThreadExchangeStreamCaptureMode(int* mode);
FAKE_API CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags);
FAKE_API CUresult cuGraphLaunch(void* exec, void* hStream);
FAKE_API CUresult cuGraphExecDestroy(void* exec);
FAKE_API CUresult cuGraphDestroy(void* graph);
FAKE_API CUresult cuUserObjectCreate(void** object, void* ptr, void (*destroy)(void*), unsigned initialRefcount,
                                     unsigned flags);
FAKE_API CUresult cuUserObjectRelease(void* object, unsigned count);
FAKE_API CUresult cuGraphRetainUserObject(void* graph, void* object, unsigned count, unsigned flags);
FAKE_API CUresult cuMulticastCreate(unsigned long long* mcHandle, const void* prop);
FAKE_API CUresult cuMulticastAddDevice(unsigned long long mcHandle, CUdevice dev);
FAKE_API CUresult cuMulticastBindAddr(unsigned long long mcHandle, size_t mcOffset, CUdeviceptr memptr, size_t size,
                                      unsigned long long flags);
FAKE_API CUresult cuMulticastUnbind(unsigned long long mcHandle, CUdevice dev, size_t mcOffset, size_t size);
FAKE_API CUresult cuMulticastGetGranularity(size_t* granularity, const void* prop, int option);
FAKE_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, unsigned long long flags,
                                      int* symbolStatus);
