#include "src/backends/cuda/cuda_multicast.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "src/backends/cuda/device_memory.h"
#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {
namespace {

// What each rank says in each round.
struct McWord {
  int32_t ok;
  int32_t pid;
  int64_t busKey;    // the GPU's PCI domain/bus/device: ranks sharing one cannot share a multicast team
  uint64_t handle;   // rank 0: the object's handle in its process
  uint64_t bytes;    // rank 0: the object's size
  FdTicket ticket;   // rank 0: the exported object, for ranks of other processes
  char why[96];      // !ok: what failed
  int32_t byConfig;  // !ok because the communicator's config turned multicast off (not a failure)
};

// Ranks of one process share rank 0's handle: the last of them to let go releases it.
std::mutex& handlesMu() {
  static std::mutex mu;
  return mu;
}
std::map<CUmemGenericAllocationHandle, int>& heldHandles() {
  static std::map<CUmemGenericAllocationHandle, int> m;
  return m;
}
void holdHandle(CUmemGenericAllocationHandle h) {
  std::lock_guard<std::mutex> lock(handlesMu());
  ++heldHandles()[h];
}
// True when the caller was the last holder (and must release it).
bool dropHandle(CUmemGenericAllocationHandle h) {
  std::lock_guard<std::mutex> lock(handlesMu());
  auto it = heldHandles().find(h);
  if (it == heldHandles().end() || --it->second > 0) return false;
  heldHandles().erase(it);
  return true;
}

// Rank 0's offer of the exported object, withdrawn however create() returns (every importer fetched it by then,
// or never will).
struct Offer {
  FdTicket ticket{};
  bool live = false;
  ~Offer() {
    if (live) withdrawFd(ticket);
  }
};

void say(McWord* w, const std::string& why) {
  w->ok = 0;
  snprintf(w->why, sizeof(w->why), "%s", why.c_str());
}

// The first rank that failed this round, or -1.
int firstFailed(const std::vector<McWord>& all) {
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p].ok == 0) return static_cast<int>(p);
  }
  return -1;
}

}  // namespace

Result<std::unique_ptr<CudaMulticast>> CudaMulticast::create(const CuApi* api, int rank, const std::vector<Rank>& ranks,
                                                             char* area, size_t areaBytes, size_t bindBytes,
                                                             const AllGatherFn& allGather, double timeoutSec,
                                                             std::string* why, bool required,
                                                             const std::shared_ptr<std::atomic<int>>& held,
                                                             const char* off) {
  const int n = static_cast<int>(ranks.size());
  const int device = ranks[static_cast<size_t>(rank)].device;
  const int mode = static_cast<int>(params::NvlsEnable());
  std::unique_ptr<CudaMulticast> m(new CudaMulticast());
  m->api_ = api;
  m->device_ = device;
  m->area_ = area;
  bool otherProcesses = false;
  for (int p = 0; p < n; ++p) {
    otherProcesses = otherProcesses || ranks[static_cast<size_t>(p)].pid != ranks[0].pid;
  }
  std::vector<McWord> all(static_cast<size_t>(n));
  McWord& me = all[static_cast<size_t>(rank)];
  Offer offer;
  me = McWord{};
  me.ok = 1;
  me.pid = static_cast<int32_t>(getpid());
  int bus = 0, dom = 0, dev = 0;
  if (off != nullptr) {
    say(&me, off);
    me.byConfig = 1;
  } else if (mode == 0) {
    say(&me, "NCCL_NVLS_ENABLE=0");
  } else if (params::Deterministic() != 0) {
    say(&me, "BRAID_DETERMINISTIC=1 (the switch's reduction order is its own)");
  } else if (!api->hasMulticast()) {
    say(&me, strPrintf("the CUDA driver (%d.%d) has no multicast entry points (CUDA 12.1 or newer)",
                       api->driverVersion / 1000, api->driverVersion % 1000 / 10));
  } else {
    int supported = 0;
    Status st = api->check(api->deviceGetAttribute(&supported, static_cast<int>(CuDeviceAttr::kMulticast), device),
                           "cuDeviceGetAttribute(MULTICAST_SUPPORTED)");
    if (st.isOk()) {
      st = api->check(api->deviceGetAttribute(&bus, static_cast<int>(CuDeviceAttr::kPciBusId), device),
                      "cuDeviceGetAttribute(PCI_BUS_ID)");
    }
    if (st.isOk()) {
      st = api->check(api->deviceGetAttribute(&dom, static_cast<int>(CuDeviceAttr::kPciDomainId), device),
                      "cuDeviceGetAttribute(PCI_DOMAIN_ID)");
    }
    if (st.isOk()) {
      st = api->check(api->deviceGetAttribute(&dev, static_cast<int>(CuDeviceAttr::kPciDeviceId), device),
                      "cuDeviceGetAttribute(PCI_DEVICE_ID)");
    }
    if (!st.isOk()) {
      say(&me, st.message());
    } else if (supported == 0) {
      say(&me, strPrintf("device %d has no multicast support (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0: no "
                         "NVSwitch)",
                         device));
    } else if (const int n0 = held->load(); n0 >= params::NvlsObjects()) {
      // Every rank of the communicator counts the same objects (each is set up collectively), so all agree here.
      say(&me, strPrintf("this communicator holds %d multicast objects already (BRAID_NVLS_OBJECTS=%lld)", n0,
                         static_cast<long long>(params::NvlsObjects())));
    }
  }
  me.busKey = (static_cast<int64_t>(dom) << 32) | (static_cast<int64_t>(bus) << 8) | dev;
  if (rank == 0 && me.ok != 0) {
    CuMulticastObjectProp prop;
    prop.numDevices = static_cast<unsigned>(n);
    prop.handleTypes = otherProcesses ? kCuMemHandleTypePosixFd : 0;
    size_t gran = 0;
    Status st = api->check(api->multicastGetGranularity(&gran, &prop, kCuMulticastGranularityMinimum),
                           "cuMulticastGetGranularity");
    const size_t bytes = gran == 0 ? 0 : (bindBytes + gran - 1) / gran * gran;
    if (st.isOk() && bytes > areaBytes) {
      st = invalidArgument(
          "the area to bind (%zu bytes to the end of its allocation) is smaller than %zu bytes rounded up to the "
          "multicast granularity (%zu)",
          areaBytes, bindBytes, gran);
    }
    prop.size = bytes;
    if (st.isOk()) st = api->check(api->multicastCreate(&m->handle_, &prop), "cuMulticastCreate");
    if (st.isOk()) {
      holdHandle(m->handle_);
      m->held_ = true;
      me.handle = m->handle_;
      me.bytes = bytes;
    }
    if (st.isOk() && otherProcesses) {
      int fd = -1;
      st = api->check(api->memExportToShareableHandle(&fd, m->handle_, kCuMemHandleTypePosixFd, 0),
                      "cuMemExportToShareableHandle(multicast)");
      if (st.isOk()) {
        int others = 0;
        for (const Rank& r : ranks) others += r.pid != ranks[0].pid ? 1 : 0;
        Result<FdTicket> t = offerFd(fd, others);
        close(fd);
        if (t.isOk()) {
          me.ticket = t.value();
          offer.ticket = t.value();
          offer.live = true;
        } else {
          st = t.status();
        }
      }
    }
    if (!st.isOk()) say(&me, st.message());
  }
  // Round 1: everyone's verdict, and rank 0's object.
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(McWord)).withContext("agreeing on NVLS multicast"));
  // A rank whose config turns multicast off (ncclConfig_t.nvlsHostMode) overrides NCCL_NVLS_ENABLE=1 on every rank
  // alike, so none fails its init while another goes on.
  for (const McWord& w : all) required = required && w.byConfig == 0;
  // Whether every rank succeeded in this round; else *why names the first that did not, and under
  // NCCL_NVLS_ENABLE=1 `requiredError` is the init's error.
  Status requiredError;
  auto agreed = [&](const char* stage) {
    const int f = firstFailed(all);
    if (f < 0) return true;
    *why = strPrintf("rank %d: %s", f, all[static_cast<size_t>(f)].why);
    if (required) {
      requiredError =
          Status(Code::kInvalidUsage,
                 strPrintf("NVLS multicast %s failed and NCCL_NVLS_ENABLE=1 requires it: %s", stage, why->c_str()));
    }
    return false;
  };
  for (int p = 0; p < n && firstFailed(all) < 0; ++p) {
    for (int q = 0; q < p; ++q) {
      if (all[static_cast<size_t>(p)].busKey == all[static_cast<size_t>(q)].busKey) {
        *why = strPrintf("ranks %d and %d share a GPU (a multicast team holds each device once)", q, p);
        if (required) return Status(Code::kInvalidUsage, "NCCL_NVLS_ENABLE=1 but " + *why);
        return std::unique_ptr<CudaMulticast>();  // the destructor releases what this rank holds
      }
    }
  }
  // Every exit from here on releases what this rank holds: m's destructor does it, in order.
  auto fallback = [&]() -> Result<std::unique_ptr<CudaMulticast>> {
    if (!requiredError.isOk()) return requiredError;
    return std::unique_ptr<CudaMulticast>();
  };
  if (!agreed("setup")) {
    return fallback();
  }
  m->bytes_ = all[0].bytes;
  // Round 2: every rank takes the object and adds its device.
  me = McWord{};
  me.ok = 1;
  Status st;
  if (rank != 0) {
    if (all[0].pid == static_cast<int32_t>(getpid())) {
      m->handle_ = all[0].handle;
      holdHandle(m->handle_);
      m->held_ = true;
    } else {
      Result<int> fd = fetchFd(all[0].ticket, timeoutSec);
      st = fd.status();
      if (st.isOk()) {
        st = api->check(
            api->memImportFromShareableHandle(&m->handle_, reinterpret_cast<void*>(static_cast<intptr_t>(fd.value())),
                                              kCuMemHandleTypePosixFd),
            "cuMemImportFromShareableHandle(multicast)");
        close(fd.value());
        if (st.isOk()) {
          holdHandle(m->handle_);
          m->held_ = true;
        }
      }
    }
  }
  if (st.isOk()) st = api->check(api->multicastAddDevice(m->handle_, device), "cuMulticastAddDevice");
  if (!st.isOk()) say(&me, st.message());
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(McWord)).withContext("adding devices to the multicast object"));
  if (offer.live) {  // every importer fetched it by now (or never will)
    withdrawFd(offer.ticket);
    offer.live = false;
  }
  if (!agreed("adding devices")) return fallback();
  // Round 3: with every device added, each rank binds its area and maps the object.
  me = McWord{};
  me.ok = 1;
  st = api->check(api->multicastBindAddr(m->handle_, 0, reinterpret_cast<CUdeviceptr>(area), m->bytes_, 0),
                  "cuMulticastBindAddr");
  m->bound_ = st.isOk();
  if (st.isOk()) {
    Result<CUdeviceptr> va = mapAndGrant(api, m->handle_, m->bytes_, {device}, true, m->bytes_ & -m->bytes_);
    st = va.status();
    if (va.isOk()) m->base_ = reinterpret_cast<char*>(va.value());
  }
  if (!st.isOk()) say(&me, st.message());
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(McWord)).withContext("binding the multicast object"));
  if (!agreed("binding and mapping")) return fallback();
  m->counted_ = held;
  held->fetch_add(1);
  why->clear();
  return m;
}

CudaMulticast::~CudaMulticast() {
  release();
}

void CudaMulticast::release() {
  if (base_ != nullptr) {
    Status st = unmapAndFree(api_, reinterpret_cast<CUdeviceptr>(base_), bytes_);
    if (!st.isOk()) BRAID_WARN("unmapping the multicast object: %s", st.message().c_str());
    base_ = nullptr;
  }
  if (bound_) {
    Status st = api_->check(api_->multicastUnbind(handle_, device_, 0, bytes_), "cuMulticastUnbind");
    if (!st.isOk()) BRAID_WARN("unbinding the direct area from the multicast object: %s", st.message().c_str());
    bound_ = false;
  }
  if (held_) {
    if (dropHandle(handle_)) (void)api_->memRelease(handle_);
    held_ = false;
  }
  if (counted_) {
    counted_->fetch_sub(1);
    counted_.reset();
  }
}

}  // namespace braid
