// The windows device code finds by address (ncclFindWindow, include/nccl_device/core.h): chunks of 32 entries
// {base, size, window} in memory the backend's kernels read (Backend::allocDeviceBlock), chained by a next pointer,
// the layout of nccl_device's ncclDevCommWindowTable (src/api checks it). A host mirror says which entries are free,
// so adding and removing a window writes one entry (and, when every chunk is full, a new chunk and one link).
//
// A kernel reads the table while it runs: entries change only at registration and deregistration, which NCCL's
// rules already keep apart from kernels that use those windows.
//
// Thread safety: none; Windows calls it under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/status.h"

namespace braid {

class Backend;

class WindowTable {
 public:
  static constexpr int kPerChunk = 32;
  struct Entry {
    uintptr_t base = 0, size = 0;
    const void* window = nullptr;  // the window's descriptor (ncclWindow_t); null: a free entry
  };
  struct Chunk {  // as device code reads it
    Entry entries[kPerChunk];
    void* next;
  };

  explicit WindowTable(Backend* backend) : backend_(backend) {}
  ~WindowTable();
  WindowTable(const WindowTable&) = delete;
  WindowTable& operator=(const WindowTable&) = delete;

  // The first chunk (allocated, empty, on first use). Errors: the backend's allocation.
  Result<const void*> head();
  [[nodiscard]] Status add(const void* base, size_t size, const void* window);
  // The entry of `window`, if any, is freed.
  [[nodiscard]] Status remove(const void* window);

 private:
  Status grow();
  Status write(size_t index);  // entry `index` of the mirror to its chunk

  Backend* backend_;
  std::vector<void*> chunks_;
  std::vector<Entry> mirror_;  // kPerChunk per chunk
};

}  // namespace braid
