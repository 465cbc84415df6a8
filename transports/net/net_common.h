// Shared by the built-in networks (socket/, libfabric/, ibverbs/): they are written in C++ against Status and
// exported as ncclNet_v8_t tables; these helpers turn a failed Status into the ABI's ncclResult_t plus a WARN
// through the logger their init() received (so NetModule can put the text in its own Status).
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "include/nccl_net.h"
#include "src/common/status.h"

namespace braid {
namespace net {

// The logger given to the built-ins' init(); null before init (messages are then dropped).
inline std::atomic<ncclDebugLogger_t>& builtinLogger() {
  static std::atomic<ncclDebugLogger_t> logger{nullptr};
  return logger;
}

// Logs s (a failure) at WARN under NET and returns its ncclResult_t.
inline ncclResult_t netFail(const Status& s, const char* file, int line) {
  if (s.isOk()) return ncclSuccess;
  ncclDebugLogger_t log = builtinLogger().load();
  if (log != nullptr) log(NCCL_LOG_WARN, NCCL_NET, file, line, "%s", s.message().c_str());
  return static_cast<ncclResult_t>(s.code());
}

}  // namespace net
}  // namespace braid

// `return BRAID_NET_RESULT(status);` in an exported ncclNet_v8_t function.
#define BRAID_NET_RESULT(expr) ::braid::net::netFail((expr), __FILE__, __LINE__)

#define BRAID_NET_INFO(...)                                                                          \
  do {                                                                                               \
    ncclDebugLogger_t braid_log_ = ::braid::net::builtinLogger().load();                             \
    if (braid_log_ != nullptr) braid_log_(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
