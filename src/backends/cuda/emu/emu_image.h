// The emulator's host image: what braid hands cuLibraryLoadData in place of a fatbin when the driver is the fake
// (tests/fake_cuda), so that cuLibraryGetKernel, cuKernelGetFunction and cuLaunchKernel on the fake run the kernels
// of src/backends/cuda/kernels/ compiled by g++ over the CTA emulator. A plain C layout: the fake driver includes
// this header and nothing else of braid. A real driver rejects the image (it is not a fatbin, cubin or PTX), and
// braid only offers it after the fatbin (src/backends/cuda/kernel_image.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid {

constexpr char kEmuImageMagic[8] = {'B', 'R', 'A', 'I', 'D', 'E', 'M', 'U'};
constexpr uint32_t kEmuImageVersion = 3;

// What the driver says about an address range a kernel is given (the fake answers): a GPU faults on anything but
// kReachable.
enum EmuReach : int {
  kReachable = 0,    // device memory of the launching device, or pinned (mapped) host memory
  kPageable = 1,     // memory the driver does not know: pageable host memory (or freed device memory)
  kOtherDevice = 2,  // device memory of another device
  kPastTheEnd = 3,   // starts inside an allocation and runs past its end
};
using EmuClassifyFn = int (*)(const void* p, size_t bytes, int device);
// The buffers bound behind [mc, mc + bytes) of a multicast mapping, for a kernel on `device`: writes the address
// in each bound buffer that corresponds to mc (at most `max`), in the order the driver's switch combines them, and
// returns how many; 0 or less when the range is not inside one multicast mapping the device was given access to,
// or not every device has bound memory behind it.
using EmuMulticastFn = int (*)(const void* mc, size_t bytes, int device, void** uc, int max);

// What the driver offers the image's kernels.
struct EmuDriverHooks {
  EmuClassifyFn classify;
  EmuMulticastFn multicast;
};

struct EmuImage {
  char magic[8];  // kEmuImageMagic
  uint32_t version;
  uint32_t nkernels;
  const char* const* names;    // [nkernels]
  const uint32_t* paramBytes;  // [nkernels]: each kernel takes one parameter of this size (the launch copies it)
  // Runs kernel k to its end on the calling thread (the fake's stream thread): `grid` CTAs of `block` threads on
  // device `device`, whose resident CTA slots are `residentSlots`. Every address the parameter leads to is first
  // checked with hooks->classify (the driver's view of memory); multimem accesses go through hooks->multicast.
  // Returns 0, or non-zero with a message in err.
  int (*launch)(uint32_t kernel, int device, int residentSlots, uint32_t grid, uint32_t block, const void* param,
                const EmuDriverHooks* hooks, char* err, size_t errBytes);
};

// The first bytes of a fatbin (the fake tells one apart from an image it cannot run).
constexpr uint32_t kFatbinMagic = 0xBA55ED50u;

}  // namespace braid
