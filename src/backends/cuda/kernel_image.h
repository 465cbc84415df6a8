// The kernels as the driver loads them. libnccl.so.2 carries two images: the fatbin nvcc built from
// src/backends/cuda/kernels/ (sm_90 SASS + compute_90 PTX; absent from a build without the toolkit), and the
// emulator's host image (emu/emu_image.h), which only the fake driver runs. The library is loaded once per process
// (cuLibraryLoadData: context-independent) from the first image the driver accepts, fatbin first, so a real driver
// never meets the emulator image unless the fatbin failed, and then both refusals are reported.
//
// Thread safety: kernelLibrary() is safe from any thread; launches follow the driver's rules (the calling thread's
// current context must be the stream's).
#pragma once

#include <cstddef>
#include <string>

#include "src/backends/common/kernel_main.h"
#include "src/backends/cuda/cu_api.h"
#include "src/common/status.h"

namespace braid {

// The embedded fatbin, or null (and 0 bytes) in a build without nvcc.
const void* kernelFatbin(size_t* bytes);

struct KernelLibrary {
  CUlibrary library = nullptr;
  CUkernel kernels[3] = {nullptr, nullptr, nullptr};  // indexed by ProtoId
  CUkernel direct = nullptr;                          // kDirectKernelName
  CUkernel rma = nullptr;                             // kRmaKernelName
  std::string source;                                 // which image loaded, for logs and braid-info
};

// The process's kernels, loaded at the first call. Errors (kCudaError) say why each image was refused.
[[nodiscard]] Result<const KernelLibrary*> kernelLibrary(const CuApi& api);

// Launches the protocol's kernel: one CTA per channel of `args`, `threads` threads each (at most
// kKernelMaxThreads), on `stream` of the current context. Returns once queued; the kernel reports through
// args.status.
[[nodiscard]] Status launchKernel(const CuApi& api, ProtoId proto, const KernelArgs& args, int threads,
                                  CUstream stream);
// The same for the direct entry (args.direct set, one CTA per lane: args.nchannels).
[[nodiscard]] Status launchDirectKernel(const CuApi& api, const KernelArgs& args, int threads, CUstream stream);
// The signal entry (args.rma set): one CTA of one thread.
[[nodiscard]] Status launchRmaKernel(const CuApi& api, const KernelArgs& args, CUstream stream);

}  // namespace braid
