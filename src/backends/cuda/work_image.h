// One launch's work in memory a kernel reads: the CPU backend's flattened form (src/backends/cpu/executor.h,
// ChannelWork::prepare) copied into one block, every pointer moved with it, each connector's cursor replaced by
// the backend's persistent one (memory that outlives the launch), and the kernel's arguments pointing into it.
// The block is written on the host and read by the kernel at another address: device memory it is copied to
// before the kernel runs (so the kernel's many small reads of its work do not cross PCIe), or the same address
// for a host view (error messages read it). The buffers the items point to (user buffers, LL staging, FIFOs) are
// the caller's.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "src/backends/common/kernel_main.h"
#include "src/backends/cpu/executor.h"

namespace braid {

// Bytes the image of these channels needs (channels without items take none).
size_t workImageBytes(const std::vector<const ChannelWork*>& channels);

// Writes the image at dst (workImageBytes of room), its pointers valid where the block will be read, `at` (dst
// itself, or the device memory the caller copies it to), and returns the kernel's arguments, with one CTA per
// channel that has items. cursorFor(owner) gives the persistent cursor of the connector behind a ConnSlot.
KernelArgs writeWorkImage(const std::vector<const ChannelWork*>& channels, char* dst, char* at,
                          const std::function<FifoCursor*(void* owner)>& cursorFor);

}  // namespace braid
