// Every registered window of the process, by handle, for the NCCL 2.29 host queries that name a window and nothing
// else (ncclGetLsaDevicePointer and its kind): which communicator it belongs to is not an argument.
//
// Each entry is a copy of what the queries answer from, made when the window is registered and dropped before its
// descriptor is freed, so a query never reaches into a communicator being torn down. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "src/core/teams.h"

struct ncclWindow_vidmem;

namespace braid {

struct WindowView {
  int worldRank = 0, nRanks = 0;
  Team lsa;                        // this rank's LSA team
  std::vector<char*> lsaBases;     // [LSA member] its buffer as this rank reaches it (null: out of reach, see why)
  std::vector<uint64_t> lsaBytes;  // [LSA member] its buffer's size
  std::vector<std::string> why;    // [LSA member] why out of reach
  char* multimem = nullptr;        // the multicast mapping of every member's buffer, or null
  uint64_t multimemBytes = 0;      // how much of each buffer it covers
};

void listWindow(const ncclWindow_vidmem* handle, WindowView view);
void unlistWindow(const ncclWindow_vidmem* handle);
// The window's view, or kInvalidArgument naming `what` for a handle no communicator of this process holds.
Result<WindowView> lookupWindow(const ncclWindow_vidmem* handle, const char* what);

}  // namespace braid
