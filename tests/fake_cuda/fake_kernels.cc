// The strict fake CUDA driver's modules and launches. It runs no device code: cuLibraryLoadData accepts only the
// emulator's host image (src/backends/cuda/emu/emu_image.h), which braid offers after its fatbin; a fatbin is
// refused with CUDA_ERROR_NO_BINARY_FOR_GPU, anything else with CUDA_ERROR_INVALID_IMAGE. cuLaunchKernel copies
// the kernel's parameter at the call (as the driver does: the caller may reuse it at once) and runs the kernel on
// the stream's thread through the image, over the CTA emulator, so later work on the stream waits for it. First
// every address the parameter leads to is checked as a GPU would meet it: pageable host memory, another device's
// memory without peer access (or a cuMem mapping without cuMemSetAccess for this device) or a range past its allocation
// fails the launch, named. A kernel the emulator fails (deadlock, divergent barrier, a thread that never ends) is
// printed to stderr and leaves the device's context with the sticky CUDA_ERROR_LAUNCH_FAILED, as a trap would on a GPU.
//
// Modelled narrower than the driver (each refused with CUDA_ERROR_NOT_SUPPORTED, which braid never meets): 1-D
// grids and blocks only, no dynamic shared memory, parameters through kernelParams only (not `extra`).
// BRAID_FAKE_CUDA_SM_SLOTS sets the resident CTA slots per device (default: its SM count, 132).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/backends/cuda/emu/emu_image.h"
#include "tests/fake_cuda/fake_cuda.h"

using namespace fakecuda;

namespace {

constexpr unsigned kMaxBlockThreads = 1024;

const braid::EmuImage* imageOf(const Library& l) {
  return static_cast<const braid::EmuImage*>(l.image);
}

// The driver's view of an address range a kernel on `device` is given (emu_image.h's EmuReach).
int classify(const void* p, size_t bytes, int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  auto it = findAllocation(s, at);
  if (it == s.allocations.end()) return braid::kPageable;
  if (bytes > it->first + it->second.bytes - at) return braid::kPastTheEnd;
  if (!reachableFrom(s, it->second, device)) return braid::kOtherDevice;
  return braid::kReachable;
}

}  // namespace

namespace fakecuda {
int residentSlots() {
  const char* v = getenv("BRAID_FAKE_CUDA_SM_SLOTS");
  const int n = v != nullptr ? atoi(v) : 0;
  return n > 0 ? n : 132;  // an H200's SMs
}
}  // namespace fakecuda

FAKE_API CUresult cuLibraryLoadData(void** library, const void* code, void*, void**, unsigned numJitOptions, void*,
                                    void**, unsigned numLibraryOptions) {
  FAKE_ENTER("cuLibraryLoadData");
  FAKE_REQUIRE_INIT();
  if (library == nullptr || code == nullptr) return kInvalidValue;
  if (numJitOptions != 0 || numLibraryOptions != 0) return kNotSupported;
  uint32_t magic = 0;
  memcpy(&magic, code, sizeof(magic));
  if (magic == braid::kFatbinMagic) return kNoBinaryForGpu;  // device code: the fake runs none
  const auto* img = static_cast<const braid::EmuImage*>(code);
  if (memcmp(img->magic, braid::kEmuImageMagic, sizeof(img->magic)) != 0) return kInvalidImage;
  if (img->version != braid::kEmuImageVersion) return kInvalidImage;
  auto l = std::make_unique<Library>(Library{code});
  *library = l.get();
  s.libraries[l.get()] = std::move(l);
  return kSuccess;
}

FAKE_API CUresult cuLibraryUnload(void* library) {
  FAKE_ENTER("cuLibraryUnload");
  FAKE_REQUIRE_INIT();
  auto it = s.libraries.find(library);
  if (it == s.libraries.end()) return kInvalidHandle;
  // Its kernels and functions go with it; a handle used afterwards is invalid.
  for (auto k = s.kernels.begin(); k != s.kernels.end();) {
    if (k->second->library != it->second.get()) {
      ++k;
      continue;
    }
    for (auto f = s.functions.begin(); f != s.functions.end();) {
      f = f->second->kernel == k->second.get() ? s.functions.erase(f) : std::next(f);
    }
    k = s.kernels.erase(k);
  }
  s.libraries.erase(it);
  return kSuccess;
}

FAKE_API CUresult cuLibraryGetKernel(void** kernel, void* library, const char* name) {
  FAKE_ENTER("cuLibraryGetKernel");
  FAKE_REQUIRE_INIT();
  if (kernel == nullptr || name == nullptr) return kInvalidValue;
  auto it = s.libraries.find(library);
  if (it == s.libraries.end()) return kInvalidHandle;
  const braid::EmuImage* img = imageOf(*it->second);
  for (uint32_t i = 0; i < img->nkernels; ++i) {
    if (strcmp(img->names[i], name) != 0) continue;
    for (auto& k : s.kernels) {
      if (k.second->library == it->second.get() && k.second->index == i) {
        *kernel = k.first;
        return kSuccess;
      }
    }
    auto k = std::make_unique<Kernel>(Kernel{it->second.get(), i});
    *kernel = k.get();
    s.kernels[k.get()] = std::move(k);
    return kSuccess;
  }
  return kNotFound;
}

FAKE_API CUresult cuKernelGetFunction(void** func, void* kernel) {
  FAKE_ENTER("cuKernelGetFunction");
  FAKE_REQUIRE_INIT();
  if (func == nullptr) return kInvalidValue;
  if (tlsCurrent == nullptr) return kInvalidContext;
  auto it = s.kernels.find(kernel);
  if (it == s.kernels.end()) return kInvalidHandle;
  for (auto& f : s.functions) {
    if (f.second->kernel == it->second.get() && f.second->device == tlsCurrent->device) {
      *func = f.first;
      return kSuccess;
    }
  }
  auto f = std::make_unique<Function>(Function{it->second.get(), tlsCurrent->device});
  *func = f.get();
  s.functions[f.get()] = std::move(f);
  return kSuccess;
}

FAKE_API CUresult cuLaunchKernel(void* f, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                                 unsigned blockY, unsigned blockZ, unsigned sharedMemBytes, void* hStream,
                                 void** kernelParams, void** extra) {
  FAKE_ENTER("cuLaunchKernel");
  FAKE_REQUIRE_INIT();
  if (tlsCurrent == nullptr) return kInvalidContext;
  FAKE_REQUIRE_HEALTHY();
  auto fn = s.functions.find(f);
  if (fn == s.functions.end()) return kInvalidHandle;
  if (fn->second->device != tlsCurrent->device) return kInvalidHandle;  // loaded for another context
  if (gridX == 0 || gridY == 0 || gridZ == 0 || blockX == 0 || blockY == 0 || blockZ == 0) return kInvalidValue;
  if (static_cast<unsigned long long>(blockX) * blockY * blockZ > kMaxBlockThreads) return kInvalidValue;
  if (gridY != 1 || gridZ != 1 || blockY != 1 || blockZ != 1 || sharedMemBytes != 0 || extra != nullptr) {
    return kNotSupported;
  }
  if (kernelParams == nullptr || kernelParams[0] == nullptr) return kInvalidValue;
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, hStream, &st); r != kSuccess) return r;
  if (st->device != tlsCurrent->device) return kInvalidHandle;
  const Kernel& k = *fn->second->kernel;
  const braid::EmuImage* img = imageOf(*k.library);
  const uint32_t index = k.index;
  // The parameter is copied now: the caller may change or free it as soon as this returns.
  std::vector<char> param(img->paramBytes[index]);
  memcpy(param.data(), kernelParams[0], param.size());
  const int device = st->device;
  const int slots = residentSlots();
  enqueue(s, st, [img, index, device, slots, gridX, blockX, param = std::move(param)] {
    char err[2048] = {0};
    static const braid::EmuDriverHooks kHooks = {&classify, &resolveMulticast};
    if (img->launch(index, device, slots, gridX, blockX, param.data(), &kHooks, err, sizeof(err)) != 0) {
      fprintf(stderr, "fake CUDA: kernel %s failed on device %d: %s\n", img->names[index], device, err);
      state().devices[static_cast<size_t>(device)].sticky->store(kLaunchFailed);
    }
  });
  return kSuccess;
}
