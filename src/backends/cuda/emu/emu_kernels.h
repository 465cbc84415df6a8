// The emulator's host image: the kernels of src/backends/cuda/kernels/braid_kernel.cu compiled by g++ over EmuCta,
// under the same names (kernelName in kernel_main.h), so whatever launches a kernel by name (the CUDA backend
// through the driver, the fake driver, a test) runs the same source on a machine without a GPU.
#pragma once

#include <cstddef>

#include "src/backends/common/kernel_main.h"
#include "src/backends/cuda/emu/cta_emulator.h"
#include "src/backends/cuda/emu/emu_image.h"
#include "src/common/status.h"

namespace braid {

struct EmuKernel {
  const char* name;
  void (*run)(const EmuCta& cta, const KernelArgs& args);  // one simulated thread of CTA cta.blockId()
};

// The kernel of that name, or null.
const EmuKernel* findEmuKernel(const char* name);

// Launches the named kernel with one CTA per channel of `args` and `threads` threads each; cfg's grid and block
// are set from those. Fails on what emuLaunch fails on, and names an unknown kernel.
[[nodiscard]] Status emuRunKernel(const char* name, const KernelArgs& args, int threads, EmuLaunchConfig cfg);

// The image handed to the fake driver (emu_image.h): every kernel above, run on one EmuDevice per device ordinal;
// the emulator's deadline is BRAID_TIMEOUT's plus a margin (the kernel's own deadline reports first), and
// BRAID_EMU_CHAOS seeds its chaos mode.
const EmuImage* emuImage();

}  // namespace braid
