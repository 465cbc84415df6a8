// The device-side cursors of a CUDA backend's connectors: one FifoCursor per connector in device memory (the
// kernels read and write a cursor at every step, which pinned host memory would make a PCIe round trip each), in
// blocks taken from the backend's launch memory and freed with it at destruction.
//
// A cursor carries on from its connector's own (zero unless the host ran the connector before), written on the
// stream that initialises FIFOs: outside any capture (a graph replayed must not reset it) and never behind a kernel.
//
// Thread safety: the communicator's thread only.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "src/backends/common/fifo.h"
#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/launch_memory.h"

namespace braid {

class ConnectorCursors {
 public:
  ConnectorCursors(const CuApi* api, LaunchMemory* memory) : api_(api), memory_(memory) {}

  // The cursor of `connector` (a transports' Connector), made on first use and initialised on `init`; null when no
  // device memory could be had or the initialising copy failed.
  FifoCursor* cursorFor(void* connector, CUstream init);
  // The connectors are gone (ncclCommSuspend released the links): new ones, perhaps at the same addresses, start
  // afresh in the blocks already taken, from the first.
  void forgetAll();

 private:
  const CuApi* api_;
  LaunchMemory* memory_;
  std::map<void*, FifoCursor*> cursors_;
  std::vector<CUdeviceptr> blocks_;  // filled in order
  size_t block_ = 0;                 // the one being filled
  size_t used_ = 0;                  // of it
};

}  // namespace braid
