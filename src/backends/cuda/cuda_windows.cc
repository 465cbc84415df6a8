#include "src/backends/cuda/cuda_windows.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>

#include "src/backends/common/rma_kernel.h"
#include "src/backends/cuda/kernel_image.h"
#include "src/common/logging.h"

namespace braid {

Result<WindowDesc> exportCudaWindow(const CuApi* api, int rank, const void* base, size_t bytes, int otherProcesses) {
  Result<ShareableRange> found = findShareable(api, base, bytes);
  if (!found.isOk()) {
    return invalidArgument("buff=%p (%zu bytes) cannot be a window on a CUDA communicator, whose peers map it: %s",
                           base, bytes, found.status().message().c_str());
  }
  const ShareableRange& range = found.value();
  WindowDesc d;
  d.allocBytes = range.bytes;
  d.offset = static_cast<uint64_t>(static_cast<const char*>(base) - range.base);
  for (int dev : range.devices) {
    if (dev >= 0 && dev < 64) d.accessMask |= uint64_t{1} << dev;
  }
  if (otherProcesses == 0) return d;
  Result<std::vector<int>> fds = exportShareable(api, range);
  if (!fds.isOk()) {
    BRAID_INFO(kLogReg, "rank %d: window buffer %p is not offered to other processes: %s", rank, base,
               fds.status().message().c_str());
    return d;
  }
  Result<FdTicket> t = offerFds(fds.value(), otherProcesses, encodeSegments(range.segments));
  for (int fd : fds.value()) close(fd);
  if (t.isOk()) {
    d.ticket = t.value();
  } else {
    BRAID_INFO(kLogReg, "rank %d: window buffer %p is not offered to other processes: %s", rank, base,
               t.status().message().c_str());
  }
  return d;
}

WindowPeer importCudaWindow(const CudaDeviceMemory& memory, double timeoutSec, const WindowDesc& mine,
                            const WindowDesc& theirs) {
  WindowPeer p;
  if (theirs.hostHash != mine.hostHash) {
    p.why = "it is on another host";
    return p;
  }
  if (theirs.pid == mine.pid) {
    const int dev = memory.device();
    if (dev >= 0 && dev < 64 && (theirs.accessMask >> dev & 1) != 0) {
      p.at = reinterpret_cast<char*>(theirs.addr);
    } else {
      p.why = strPrintf("GPU %d has no access to it (no peer access with GPU %d)", dev, theirs.device);
    }
    return p;
  }
  if (theirs.ticket.token == 0) {
    p.why = strPrintf("process %d could not offer it to other processes", static_cast<int>(theirs.pid));
    return p;
  }
  std::string info;
  Result<std::vector<int>> fds = fetchFds(theirs.ticket, timeoutSec, &info);
  if (!fds.isOk()) {
    p.why = fds.status().message();
    return p;
  }
  std::vector<size_t> sizes;
  Result<DeviceFifoMem> m = invalidArgument("its owner described its %zu mapping(s) wrongly", fds.value().size());
  if (decodeSegments(info, fds.value().size(), &sizes) &&
      std::accumulate(sizes.begin(), sizes.end(), size_t{0}) == theirs.allocBytes) {
    m = memory.importSegments(fds.value(), sizes);
  }
  for (int fd : fds.value()) close(fd);
  if (!m.isOk()) {
    p.why = strPrintf("mapping it for GPU %d: %s", memory.device(), m.status().message().c_str());
    return p;
  }
  p.held = m.value().owner;
  p.at = m.value().base + theirs.offset;
  return p;
}

void withdrawCudaWindow(const WindowDesc& mine) {
  if (mine.ticket.token != 0) withdrawFd(mine.ticket);
}

Result<WindowMulticast> bindCudaWindowMulticast(const CudaDeviceMemory& memory, const CudaDirect* direct, int rank,
                                                void* base, size_t bindBytes, const AllGatherFn& allGather,
                                                double timeoutSec, std::string* why) {
  // Decided from state every rank shares, so either every rank goes on to the collective rounds or none does.
  if (direct == nullptr) {
    *why = "the communicator has no NVLS-style path (its direct areas were not set up)";
    return WindowMulticast{};
  }
  if (!direct->multicast()) {
    *why = "the communicator has no NVLS multicast: " + direct->multicastWhy();
    return WindowMulticast{};
  }
  if (bindBytes == 0) {
    *why = "some rank's buffer is empty";
    return WindowMulticast{};
  }
  size_t areaBytes = 0;
  if (Result<ShareableRange> range = findShareable(memory.api(), base, bindBytes); range.isOk()) {
    areaBytes = range.value().bytes - static_cast<size_t>(static_cast<char*>(base) - range.value().base);
  }
  BRAID_ASSIGN_OR_RETURN(
      std::unique_ptr<CudaMulticast> mc,
      CudaMulticast::create(memory.api(), rank, direct->multicastRanks(), static_cast<char*>(base), areaBytes,
                            bindBytes, allGather, timeoutSec, why, false, direct->multicastCount()));
  WindowMulticast out;
  if (!mc) return out;
  // Listed for the direct kernel's symmetric rounds while the binding lives; unlisted before it is released.
  struct Holder {
    std::unique_ptr<CudaMulticast> mc;
    std::shared_ptr<WindowMcTable> table;
    const char* base;
    uint64_t serial;
    ~Holder() {
      table->remove(base, serial);
      mc.reset();
    }
  };
  auto h = std::make_shared<Holder>();
  out.base = mc->base();
  h->table = direct->windowMcs();
  h->base = static_cast<const char*>(base);
  h->serial = h->table->add(h->base, bindBytes, out.base);  // create() checked that areaBytes covers it
  h->mc = std::move(mc);
  out.held = std::move(h);
  return out;
}

Result<void*> allocCudaWindowMemory(const CudaDeviceMemory& memory, size_t bytes) {
  const CuApi* api = memory.api();
  BRAID_ASSIGN_OR_RETURN(void* p, cuMemAllocShareable(api, memory.device(), bytes));
  Status st =
      api->check(api->memsetD8Async(reinterpret_cast<CUdeviceptr>(p), 0, bytes, memory.stream()), "cuMemsetD8Async");
  if (st.isOk()) st = api->check(api->streamSynchronize(memory.stream()), "cuStreamSynchronize");
  if (!st.isOk()) {
    (void)cuMemFreeShareable(api, p);
    return st.withContext("zeroing the one-sided signal area");
  }
  return p;
}

Result<void*> allocCudaDeviceBlock(const CuApi* api, size_t bytes) {
  CUdeviceptr p = 0;
  BRAID_RETURN_IF_ERROR(api->check(api->memAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc"));
  return reinterpret_cast<void*>(p);
}

Status writeCudaDeviceBlock(const CudaDeviceMemory& memory, void* dst, const void* src, size_t bytes) {
  const CuApi* api = memory.api();
  BRAID_RETURN_IF_ERROR(api->check(
      api->memcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, memory.stream()),
      "cuMemcpyAsync"));
  return api->check(api->streamSynchronize(memory.stream()), "cuStreamSynchronize");
}

Status addCudaDeviceWord(const CudaDeviceMemory& memory, char* area, const uint32_t* abortWord, double timeoutSec,
                         uint64_t* word, uint64_t amount, bool* stuck) {
  *stuck = false;
  static_assert(sizeof(RmaKernelWork) <= 64 && sizeof(RmaKernelStep) <= 64, "the add's arguments fit their lines");
  static_assert(128 + sizeof(DevStatus) <= kCudaAddAreaBytes, "the add's status fits the area");
  auto* work = reinterpret_cast<RmaKernelWork*>(area);
  auto* step = reinterpret_cast<RmaKernelStep*>(area + 64);
  auto* status = reinterpret_cast<DevStatus*>(area + 128);
  *step = RmaKernelStep{word, amount, -1, kRmaStepAdd};
  work->steps = step;
  work->nsteps = 1;
  std::memset(static_cast<void*>(status), 0, sizeof(DevStatus));
  KernelArgs args;
  args.rma = work;
  args.nchannels = 1;
  args.status = status;
  args.abortFlag = abortWord;
  BRAID_RETURN_IF_ERROR(launchRmaKernel(*memory.api(), args, memory.stream()));
  const auto deadline = timeoutSec > 0 ? std::chrono::steady_clock::now() +
                                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                 std::chrono::duration<double>(timeoutSec))
                                       : std::chrono::steady_clock::time_point::max();
  BRAID_ASSIGN_OR_RETURN(const bool done, waitStreamUntil(memory.api(), memory.stream(), deadline, abortWord));
  if (done) return Status::ok();
  *stuck = true;
  const bool aborted = abortWord != nullptr && __atomic_load_n(abortWord, __ATOMIC_ACQUIRE) != 0;
  return remoteError(
      "the GIN VA signal's add (braid's one-thread kernel) %s: the GPU had no room for it (a kernel keeping every SM "
      "busy while it waits?)",
      aborted ? "was abandoned at the communicator's abort" : "had not run within BRAID_TIMEOUT");
}

}  // namespace braid
