#include "src/backends/cuda/kernel_image.h"

#include <mutex>

#include "src/backends/common/rma_kernel.h"
#include "src/backends/cuda/emu/emu_kernels.h"
#include "src/common/logging.h"

#if defined(BRAID_HAVE_KERNEL_FATBIN)
// Defined by the generated braid_kernels_fatbin.S (CMakeLists.txt), which .incbin's nvcc's output.
extern "C" const unsigned char braid_kernels_fatbin[];
extern "C" const unsigned long long braid_kernels_fatbin_size;
#endif

namespace braid {

const void* kernelFatbin(size_t* bytes) {
#if defined(BRAID_HAVE_KERNEL_FATBIN)
  *bytes = static_cast<size_t>(braid_kernels_fatbin_size);
  return braid_kernels_fatbin;
#else
  *bytes = 0;
  return nullptr;
#endif
}

namespace {

Result<KernelLibrary> load(const CuApi& api) {
  struct Candidate {
    const void* image;
    const char* what;
  };
  size_t fatbinBytes = 0;
  const void* fatbin = kernelFatbin(&fatbinBytes);
  const Candidate candidates[] = {
      {fatbin, "the fatbin (sm_90 SASS + compute_90 PTX)"},
      {emuImage(), "the CTA emulator's host image"},
  };
  std::string refusals;
  for (const Candidate& c : candidates) {
    if (c.image == nullptr) {
      refusals += strPrintf("%sthis build has no fatbin (nvcc was not found when it was configured)",
                            refusals.empty() ? "" : "; ");
      continue;
    }
    KernelLibrary lib;
    Status st = api.check(api.libraryLoadData(&lib.library, c.image, nullptr, nullptr, 0, nullptr, nullptr, 0),
                          "cuLibraryLoadData");
    if (!st.isOk()) {
      refusals += strPrintf("%s%s: %s", refusals.empty() ? "" : "; ", c.what, st.message().c_str());
      continue;
    }
    for (ProtoId p : {ProtoId::kLL, ProtoId::kLL128, ProtoId::kSimple}) {
      CUkernel& k = lib.kernels[static_cast<int>(p)];
      BRAID_RETURN_IF_ERROR(api.check(api.libraryGetKernel(&k, lib.library, kernelName(p)),
                                      strPrintf("cuLibraryGetKernel(%s)", kernelName(p)).c_str()));
    }
    BRAID_RETURN_IF_ERROR(api.check(api.libraryGetKernel(&lib.direct, lib.library, kDirectKernelName),
                                    strPrintf("cuLibraryGetKernel(%s)", kDirectKernelName).c_str()));
    BRAID_RETURN_IF_ERROR(api.check(api.libraryGetKernel(&lib.rma, lib.library, kRmaKernelName),
                                    strPrintf("cuLibraryGetKernel(%s)", kRmaKernelName).c_str()));
    lib.source = c.what;
    BRAID_INFO(kLogInit, "CUDA kernels loaded from %s (%s)", c.what, api.name.c_str());
    return lib;
  }
  return Status(Code::kCudaError, strPrintf("the CUDA driver %s loads none of braid's kernel images: %s",
                                            api.name.c_str(), refusals.c_str()));
}

}  // namespace

Result<const KernelLibrary*> kernelLibrary(const CuApi& api) {
  static std::once_flag once;
  static Result<KernelLibrary> lib = Status(Code::kInternalError, "not loaded");
  std::call_once(once, [&] { lib = load(api); });
  if (!lib.isOk()) return lib.status();
  return &lib.value();
}

namespace {

Status launchEntry(const CuApi& api, CUkernel kernel, const char* name, const KernelArgs& args, int threads,
                   CUstream stream) {
  if (threads < 1 || threads > kKernelMaxThreads) {
    return invalidArgument("kernel launch with %d threads per CTA: must be 1..%d", threads, kKernelMaxThreads);
  }
  if (args.nchannels == 0) return invalidArgument("kernel launch with no channels");
  CUfunction fn = nullptr;
  BRAID_RETURN_IF_ERROR(api.check(api.kernelGetFunction(&fn, kernel), "cuKernelGetFunction"));
  // The driver copies the parameter at the call.
  KernelArgs copy = args;
  void* params[] = {&copy};
  return api.check(
      api.launchKernel(fn, args.nchannels, 1, 1, static_cast<unsigned>(threads), 1, 1, 0, stream, params, nullptr),
      strPrintf("cuLaunchKernel(%s)", name).c_str());
}

}  // namespace

Status launchKernel(const CuApi& api, ProtoId proto, const KernelArgs& args, int threads, CUstream stream) {
  BRAID_ASSIGN_OR_RETURN(const KernelLibrary* lib, kernelLibrary(api));
  return launchEntry(api, lib->kernels[static_cast<int>(proto)], kernelName(proto), args, threads, stream);
}

Status launchDirectKernel(const CuApi& api, const KernelArgs& args, int threads, CUstream stream) {
  BRAID_ASSIGN_OR_RETURN(const KernelLibrary* lib, kernelLibrary(api));
  return launchEntry(api, lib->direct, kDirectKernelName, args, threads, stream);
}

Status launchRmaKernel(const CuApi& api, const KernelArgs& args, CUstream stream) {
  BRAID_ASSIGN_OR_RETURN(const KernelLibrary* lib, kernelLibrary(api));
  KernelArgs one = args;
  one.nchannels = 1;
  return launchEntry(api, lib->rma, kRmaKernelName, one, 1, stream);
}

}  // namespace braid
