// Shared by the built-in networks (socket/, libfabric/, ibverbs/): they are written in C++ against Status and
// exported as ncclNet_v8_t tables; these helpers turn a failed Status into the ABI's ncclResult_t plus a WARN
// through the logger their init() received (so NetModule can put the text in its own Status).
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "include/nccl_net.h"
#include "src/common/params.h"
#include "src/common/status.h"

namespace braid {
namespace net {

// The logger given to the built-ins' init(); null before init (messages are then dropped).
inline std::atomic<ncclDebugLogger_t>& builtinLogger() {
  static std::atomic<ncclDebugLogger_t> logger{nullptr};
  return logger;
}

// BRAID_TIMEOUT as the built-ins read it at init(): it bounds their connects. The plugin ABI hands init() only a
// logger, so they read their knobs there, once, as NCCL's plugins do; nothing reads the registry per connection.
inline std::atomic<double>& builtinTimeoutSec() {
  static std::atomic<double> seconds{60};
  return seconds;
}

// What every built-in's init() does first.
inline void initBuiltin(ncclDebugLogger_t logFn) {
  builtinLogger().store(logFn);
  builtinTimeoutSec().store(static_cast<double>(params::Timeout()));
}

// Why a built-in network has no devices, when the cause says more than "No device found": its library could not
// be loaded. The network records it in init(); the loader puts it in NCCL_NET's error. Keyed by network name.
class NoDeviceReasons {
 public:
  static void set(const std::string& net, const std::string& reason) {
    std::lock_guard<std::mutex> lk(mu());
    map()[net] = reason;
  }
  static std::string get(const std::string& net) {
    std::lock_guard<std::mutex> lk(mu());
    auto it = map().find(net);
    return it == map().end() ? std::string() : it->second;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, std::string>& map() {
    static std::map<std::string, std::string> m;
    return m;
  }
};

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

#define BRAID_NET_LOG(level, ...)                                                              \
  do {                                                                                         \
    ncclDebugLogger_t braid_log_ = ::braid::net::builtinLogger().load();                       \
    if (braid_log_ != nullptr) braid_log_((level), NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define BRAID_NET_INFO(...) BRAID_NET_LOG(NCCL_LOG_INFO, __VA_ARGS__)
#define BRAID_NET_WARN(...) BRAID_NET_LOG(NCCL_LOG_WARN, __VA_ARGS__)

namespace braid {
namespace net {

// A built-in network's dlopen()ed library table (ibverbs/ibv_lib.h, libfabric/ofi_lib.h): the table, or null when
// it could not be loaded, after logging why at INFO and recording it for NCCL_NET's error (the network then has
// no devices). Also logs each symbol bound at a version older than the library's default.
template <typename Table>
const Table* libraryOrNoDevices(const Result<const Table*>& loaded, const char* net) {
  if (!loaded.isOk()) {
    BRAID_NET_INFO("NET/%s : %s", net, loaded.status().message().c_str());
    NoDeviceReasons::set(net, loaded.status().message());
    return nullptr;
  }
  for (const std::string& s : loaded.value()->notDefault) {
    BRAID_NET_INFO("NET/%s : using %s, older than %s's default (braid was built against older headers)", net, s.c_str(),
                   loaded.value()->name.c_str());
  }
  return loaded.value();
}

}  // namespace net
}  // namespace braid
