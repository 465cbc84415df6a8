// CUDA ranks on the strict fake driver (tests/fake_cuda) for the API tests: the driver's entry points a test
// program uses itself (contexts, memory, streams), and ranks as threads each with its own device's context.
//
// BRAID_TEST_CUDA_DRIVER=libcuda.so.1 runs the same tests on a real driver instead (tests/gpu/run.sh): a rank asking
// for device d gets d modulo the devices there are, with NCCL_MULTI_RANK_GPU_ENABLE set where ranks then share one,
// and a test that needs what only the fake has (failure injection, its topology, its device count) skips, saying
// so (requireFake).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "nccl.h"

namespace braid_test {

// The fake driver's entry points the test itself uses (the program's side of the driver: contexts, memory,
// streams). braid opens the same library through BRAID_CUDA_DRIVER.
struct Driver {
  void* lib = nullptr;
  bool fake = true;  // the strict fake (else BRAID_TEST_CUDA_DRIVER's real driver)
  int devices = 0;
  int (*init)(unsigned) = nullptr;
  int (*retain)(void**, int) = nullptr;
  int (*setCurrent)(void*) = nullptr;
  int (*memAlloc)(unsigned long long*, size_t) = nullptr;
  int (*memFree)(unsigned long long) = nullptr;
  int (*memcpyAsync)(unsigned long long, unsigned long long, size_t, void*) = nullptr;
  int (*streamCreate)(void**, unsigned) = nullptr;
  int (*streamSync)(void*) = nullptr;
  int (*streamDestroy)(void*) = nullptr;
  int (*deviceCount)(int*) = nullptr;
  // cuMem, for memory a program makes itself (cuMemCreate, cuMemMap) rather than with ncclMemAlloc.
  int (*memCreate)(unsigned long long*, size_t, const void*, unsigned long long) = nullptr;
  int (*memRelease)(unsigned long long) = nullptr;
  int (*addressReserve)(unsigned long long*, size_t, size_t, unsigned long long, unsigned long long) = nullptr;
  int (*addressFree)(unsigned long long, size_t) = nullptr;
  int (*memMap)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long) = nullptr;
  int (*memUnmap)(unsigned long long, size_t) = nullptr;
  int (*setAccess)(unsigned long long, size_t, const void*, size_t) = nullptr;
  int (*granularity)(size_t*, const void*, int) = nullptr;

  static bool& loaded() {
    static bool l = false;
    return l;
  }
  static Driver& get() {
    static Driver d = [] {
      loaded() = true;
      Driver x;
      const char* real = getenv("BRAID_TEST_CUDA_DRIVER");
      x.fake = real == nullptr || *real == '\0';
      const char* path = x.fake ? BRAID_FAKE_CUDA_DRIVER : real;
      setenv("BRAID_CUDA_DRIVER", path, 1);
      if (x.fake) setenv("BRAID_FAKE_CUDA_DEVICES", "4", 1);
      // Up to 9 ranks share the fake's 4 GPUs, 3 streams each (braid warns below 3 per rank): the hardware queues'
      // most, unless a test asks for fewer.
      setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
      x.lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
      if (x.lib == nullptr) return x;
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(x.lib, name));
      };
      sym(x.init, "cuInit");
      sym(x.retain, "cuDevicePrimaryCtxRetain");
      sym(x.setCurrent, "cuCtxSetCurrent");
      sym(x.memAlloc, "cuMemAlloc_v2");
      sym(x.memFree, "cuMemFree_v2");
      sym(x.memcpyAsync, "cuMemcpyAsync");
      sym(x.streamCreate, "cuStreamCreate");
      sym(x.streamSync, "cuStreamSynchronize");
      sym(x.streamDestroy, "cuStreamDestroy_v2");
      sym(x.deviceCount, "cuDeviceGetCount");
      sym(x.memCreate, "cuMemCreate");
      sym(x.memRelease, "cuMemRelease");
      sym(x.addressReserve, "cuMemAddressReserve");
      sym(x.addressFree, "cuMemAddressFree");
      sym(x.memMap, "cuMemMap");
      sym(x.memUnmap, "cuMemUnmap");
      sym(x.setAccess, "cuMemSetAccess");
      sym(x.granularity, "cuMemGetAllocationGranularity");
      if (x.init(0) != 0 || x.deviceCount(&x.devices) != 0 || x.devices < 1) x.lib = nullptr;
      // The tests ask for up to 4 devices: with fewer, ranks share them, also ranks of processes that never wrap
      // (rank 0's process must opt in as well as rank 1's).
      if (!x.fake && x.devices < 4) setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);
      return x;
    }();
    return d;
  }
  // The device a rank asking for d gets: d on the fake, d modulo the devices on a real driver.
  int deviceFor(int d) const { return fake ? d : d % devices; }
  // Before the threads of n ranks start (rank r asking for device deviceOf(r), r when null): on a real driver with
  // fewer devices, ranks then share one and opt in (NCCL_MULTI_RANK_GPU_ENABLE), set while one thread runs.
  void prepare(int n, const std::function<int(int)>& deviceOf = nullptr) const {
    for (int r = 0; r < n && !fake; ++r) {
      const int d = deviceOf ? deviceOf(r) : r;
      if (deviceFor(d) != d) setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    }
  }
  // Makes device d's primary context current on this thread (cudaSetDevice). On a real driver with fewer devices, d
  // wraps, and the ranks that then share one need NCCL_MULTI_RANK_GPU_ENABLE (set here only in a process of its own
  // rank, which is single-threaded then; threads of ranks call prepare first).
  bool use(int d) const {
    if (deviceFor(d) != d && getenv("NCCL_MULTI_RANK_GPU_ENABLE") == nullptr) {
      setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    }
    void* ctx = nullptr;
    return retain(&ctx, deviceFor(d)) == 0 && setCurrent(ctx) == 0;
  }
  void* alloc(size_t bytes) const {
    unsigned long long p = 0;
    return memAlloc(&p, bytes) == 0 ? reinterpret_cast<void*>(p) : nullptr;
  }
  // A program's own cuMem memory: `segments` physical allocations on `device` of `bytes` each (rounded up to the
  // granularity), mapped back to back as one range with read-write access for the devices in `access`, exportable
  // as a POSIX descriptor when asked. The handles are released at once (the mappings keep the memory). Null on
  // failure; *mapped is the range's size, for cuMemDrop.
  void* cuMemMake(size_t bytes, int device, const std::vector<int>& access, bool exportable, size_t* mapped,
                  int segments = 1) const {
    struct Prop {
      int type = 1, handleTypes = 0, locType = 1, locId = 0;
      void* win32 = nullptr;
      unsigned char compression = 0, rdma = 0;
      unsigned short usage = 0;
      unsigned char reserved[4] = {};
    } prop;
    static_assert(sizeof(Prop) == 32, "CUmemAllocationProp's layout");
    prop.handleTypes = exportable ? 1 : 0;
    prop.locId = deviceFor(device);
    size_t gran = 0;
    if (granularity(&gran, &prop, 1) != 0 || gran == 0) return nullptr;
    const size_t seg = (bytes + gran - 1) / gran * gran;
    *mapped = seg * static_cast<size_t>(segments);
    unsigned long long at = 0;
    if (addressReserve(&at, *mapped, 0, 0, 0) != 0) return nullptr;
    for (int k = 0; k < segments; ++k) {
      unsigned long long h = 0;
      if (memCreate(&h, seg, &prop, 0) != 0) return nullptr;
      const int m = memMap(at + seg * static_cast<size_t>(k), seg, 0, h, 0);
      memRelease(h);
      if (m != 0) return nullptr;
    }
    struct Access {
      int locType = 1, locId = 0, flags = 3;
    };
    std::vector<Access> desc;
    for (int d : access) {
      bool dup = false;  // devices wrap on a real driver with fewer of them
      for (const Access& a : desc) dup = dup || a.locId == deviceFor(d);
      if (!dup) desc.push_back(Access{1, deviceFor(d), 3});
    }
    if (setAccess(at, *mapped, desc.data(), desc.size()) != 0) return nullptr;
    return reinterpret_cast<void*>(at);
  }
  void cuMemDrop(void* p, size_t mapped, int segments = 1) const {
    const auto at = reinterpret_cast<unsigned long long>(p);
    const size_t seg = mapped / static_cast<size_t>(segments);
    for (int k = 0; k < segments; ++k) memUnmap(at + seg * static_cast<size_t>(k), seg);
    addressFree(at, mapped);
  }
  void copy(void* dst, const void* src, size_t bytes, void* stream) const {
    memcpyAsync(reinterpret_cast<unsigned long long>(dst), reinterpret_cast<unsigned long long>(src), bytes, stream);
  }
};

// The driver's stream capture and graph calls a test makes as a program would (the CUDA runtime's
// cudaStreamBeginCapture, ... map onto these), from the driver library `lib`.
struct Graphs {
  int (*begin)(void*, int) = nullptr;
  int (*end)(void*, void**) = nullptr;
  int (*instantiate)(void**, void*, unsigned long long) = nullptr;
  int (*launch)(void*, void*) = nullptr;
  int (*execDestroy)(void*) = nullptr;
  int (*destroy)(void*) = nullptr;
  int (*query)(void*) = nullptr;
  explicit Graphs(void* lib) {
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name)); };
    sym(begin, "cuStreamBeginCapture_v2");
    sym(end, "cuStreamEndCapture");
    sym(instantiate, "cuGraphInstantiateWithFlags");
    sym(launch, "cuGraphLaunch");
    sym(execDestroy, "cuGraphExecDestroy");
    sym(destroy, "cuGraphDestroy");
    sym(query, "cuStreamQuery");
  }
};

// Runs fn(rank, comm, stream) on n threads; thread r makes device r's context current before ncclCommInitRank
// (unless withContext says otherwise; deviceOf(r) in place of r) and has its own non-blocking stream. Returns each
// rank's init result (ncclSuccess, then fn's result).
inline std::vector<ncclResult_t> runCudaRanks(int n,
                                              const std::function<ncclResult_t(int, ncclComm_t, cudaStream_t)>& fn,
                                              const std::function<bool(int)>& withContext = nullptr,
                                              const std::function<int(int)>& deviceOf = nullptr) {
  const Driver& drv = Driver::get();
  drv.prepare(n, deviceOf);
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclResult_t> res(static_cast<size_t>(n), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const bool ctx = !withContext || withContext(r);
      if (ctx && !drv.use(deviceOf ? deviceOf(r) : r)) {
        res[static_cast<size_t>(r)] = ncclSystemError;
        return;
      }
      ncclComm_t comm = nullptr;
      ncclResult_t st = ncclCommInitRank(&comm, n, id, r);
      if (st != ncclSuccess) {
        res[static_cast<size_t>(r)] = st;
        return;
      }
      void* stream = nullptr;
      if (ctx) drv.streamCreate(&stream, 1);
      res[static_cast<size_t>(r)] = fn(r, comm, static_cast<cudaStream_t>(stream));
      ncclCommDestroy(comm);
      if (stream != nullptr) drv.streamDestroy(stream);
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

// Skips the test when it runs on a real driver: it needs `what`, which only the fake has.
#define BRAID_REQUIRE_FAKE(what)                                                              \
  do {                                                                                        \
    if (!::braid_test::Driver::get().fake) GTEST_SKIP() << "needs the fake driver: " << what; \
  } while (0)
// The same for a test whose parent must not load the driver (it forks its ranks): reads the variable instead.
#define BRAID_REQUIRE_FAKE_NOT_LOADED(what)                                                    \
  do {                                                                                         \
    const char* real_ = getenv("BRAID_TEST_CUDA_DRIVER");                                      \
    if (real_ != nullptr && *real_ != '\0') GTEST_SKIP() << "needs the fake driver: " << what; \
  } while (0)

// Rank r of two processes (each on its own fake device): in-place all-reduces of 1, 5000 and 300000 floats on a
// non-blocking stream, checked exactly. 0, or the step that failed (11 call, 12 sync, 13 async error, 14 value),
// with the reason on stderr.
inline int checkedAllReducesOfTwo(int r, ncclComm_t comm) {
  const Driver& drv = Driver::get();
  void* stream = nullptr;
  drv.streamCreate(&stream, 1);
  for (size_t count : {size_t{1}, size_t{5000}, size_t{300000}}) {
    std::vector<float> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(i % 7 + static_cast<size_t>(r));
    void* buf = drv.alloc(count * 4);
    drv.copy(buf, in.data(), count * 4, stream);
    if (ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, static_cast<cudaStream_t>(stream)) != ncclSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
      return 11;
    }
    drv.copy(out.data(), buf, count * 4, stream);
    if (drv.streamSync(stream) != 0) return 12;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
      return 13;
    }
    for (size_t i = 0; i < count; ++i) {
      if (out[i] != static_cast<float>(2 * (i % 7) + 1)) {
        fprintf(stderr, "rank %d count %zu element %zu = %f\n", r, count, i, out[i]);
        return 14;
      }
    }
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
  }
  drv.streamDestroy(stream);
  return 0;
}

// printf into a string (up to 1 KB).
inline std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

// An in-place float-sum all-reduce of `in` in a device buffer on `stream`, read back and compared exactly with
// want(i): ncclSuccess, the call's error, ncclUnhandledCudaError when the stream fails, or ncclInternalError for a
// wrong value.
inline ncclResult_t checkedAllReduce(ncclComm_t comm, cudaStream_t stream, const std::vector<float>& in,
                                     const std::function<float(size_t)>& want) {
  const Driver& drv = Driver::get();
  const size_t n = in.size();
  std::vector<float> out(n, -1);
  void* buf = drv.alloc(n * sizeof(float));
  drv.copy(buf, in.data(), n * sizeof(float), stream);
  ncclResult_t st = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream);
  if (st == ncclSuccess) {
    drv.copy(out.data(), buf, n * sizeof(float), stream);
    if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
  }
  for (size_t i = 0; st == ncclSuccess && i < n; ++i) {
    if (out[i] != want(i)) st = ncclInternalError;
  }
  drv.memFree(reinterpret_cast<unsigned long long>(buf));
  return st;
}

// An NCCL topology file (its path; the caller unlinks it) with the fake's GPUs (device d at PCI 0000:(18+d):00.0): all
// four under one PCIe switch, or two per switch with the switches under different CPUs (the pairs across them: path
// SYS); nvlinkMesh adds six NVLinks between every pair (path NVL, as on an NVLink-meshed HGX board). On a real
// driver (BRAID_TEST_CUDA_DRIVER) "": the machine's own topology, as discovered, describes its GPUs.
inline std::string writeFakeGpuTopology(bool twoSockets, bool nvlinkMesh = false) {
  const char* real = getenv("BRAID_TEST_CUDA_DRIVER");
  if (real != nullptr && *real != '\0') return "";
  char path[] = "/tmp/braid-p2p-topo-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::string xml = "<system version=\"1\">\n";
  auto gpu = [nvlinkMesh](int d) {
    std::string links;
    for (int peer = 0; nvlinkMesh && peer < 4; ++peer) {
      if (peer != d)
        links += fmt("          <nvlink target=\"0000:%02x:00.0\" count=\"6\" tclass=\"0x030000\"/>\n", 0x18 + peer);
    }
    return fmt("      <pci busid=\"0000:%02x:00.0\" class=\"0x030000\" vendor=\"0x10de\" device=\"0x2335\" "
               "subsystem_vendor=\"0x10de\" subsystem_device=\"0x18be\" link_speed=\"32.0 GT/s PCIe\" "
               "link_width=\"16\">\n        <gpu dev=\"%d\" sm=\"90\" rank=\"%d\" gdr=\"0\"%s",
               0x18 + d, d, d, links.empty() ? "/>\n" : ">\n") +
           links + (links.empty() ? "" : "        </gpu>\n") + "      </pci>\n";
  };
  auto sw = [&](int bus, int first, int last) {
    std::string s = fmt(
        "    <pci busid=\"0000:%02x:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc010\" "
        "subsystem_vendor=\"0x1000\" subsystem_device=\"0xc010\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n",
        bus);
    for (int d = first; d <= last; ++d) s += gpu(d);
    return s + "    </pci>\n";
  };
  auto cpu = [](int numa, const char* affinity) {
    return fmt(
        "  <cpu numaid=\"%d\" affinity=\"%s\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" "
        "modelid=\"143\">\n",
        numa, affinity);
  };
  if (twoSockets) {
    xml += cpu(0, "00000001") + sw(0x10, 0, 1) + "  </cpu>\n" + cpu(1, "00000002") + sw(0x20, 2, 3) + "  </cpu>\n";
  } else {
    xml += cpu(0, "00000003") + sw(0x10, 0, 3) + "  </cpu>\n";
  }
  xml += "</system>\n";
  EXPECT_EQ(write(fd, xml.data(), xml.size()), static_cast<ssize_t>(xml.size()));
  close(fd);
  return path;
}

}  // namespace braid_test
