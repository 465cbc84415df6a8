// The one logger. Lines follow NCCL's format so users' log tooling keeps working:
//   INFO:  "host:pid:tid [dev] NCCL INFO msg"
//   WARN:  "\nhost:pid:tid [dev] file.cc:123 NCCL WARN msg"
//   ATTN:  "host:pid:tid [dev] file.cc:123 NCCL ATTN msg" (NCCL 2.32's notices: important, not errors)
//   TRACE: "host:pid:tid [dev] <ms> func:line NCCL TRACE msg"
// Controlled by NCCL_DEBUG (VERSION, WARN, ATTN, INFO, ABORT, TRACE: each shows the ones before it too),
// NCCL_DEBUG_SUBSYS (comma list, ^ excludes) and NCCL_DEBUG_FILE (%h host, %p pid). Every WARN text is also kept as the
// process's last error (ncclGetLastError).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace braid {

// NCCL's ncclDebugLogLevel values (plugins pass them to the logger); 2.32 appended ATTN, which sits between WARN and
// INFO in verbosity.
enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kAbort = 4, kTrace = 5, kAttn = 6 };

// Bit values are NCCL's ncclDebugLogSubSys.
enum LogSubsys : uint64_t {
  kLogInit = 0x1,
  kLogColl = 0x2,
  kLogP2p = 0x4,
  kLogShm = 0x8,
  kLogNet = 0x10,
  kLogGraph = 0x20,
  kLogTuning = 0x40,
  kLogEnv = 0x80,
  kLogAlloc = 0x100,
  kLogCall = 0x200,
  kLogProxy = 0x400,
  kLogNvls = 0x800,
  kLogBootstrap = 0x1000,
  kLogReg = 0x2000,
  kLogProfile = 0x4000,
  kLogRas = 0x8000,
  kLogAllocHost = 0x10000,
  kLogDestroy = 0x20000,
  kLogAll = ~uint64_t(0),
};

void logMessage(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// Set once NCCL_DEBUG is read and shows no INFO or TRACE line: asking for those levels is then one load, without a
// call (the latency path asks several times per operation). False until the settings are read.
extern std::atomic<bool> gLogDetailQuiet;
bool logEnabledSlow(LogLevel level, uint64_t subsys);

// True when a message at this level/subsystem would be written (cheap; use to skip building expensive text).
inline bool logEnabled(LogLevel level, uint64_t subsys) {
  if ((level == LogLevel::kInfo || level == LogLevel::kTrace) && gLogDetailQuiet.load(std::memory_order_relaxed)) {
    return false;
  }
  return logEnabledSlow(level, subsys);
}

// Re-reads NCCL_DEBUG* (ncclResetDebugInit). Safe to call at any time.
void logReinit();

// True while this thread initializes the logger, which reads knobs under its lock: a knob read must not log then.
bool logInitializingOnThisThread();

// Device number printed in "[dev]" for messages logged by this thread.
void logSetThreadDevice(int dev);

// `pattern` with %h replaced by `host`, %p by `pid` and %% by % (NCCL_DEBUG_FILE's rules).
std::string expandPathPattern(const std::string& pattern, const char* host, int pid);

// ncclGetLastError: the error of the calling thread's latest API call if it failed, else the text of the process's
// most recent WARN (an internal thread's, say); empty when none.
std::string lastErrorText();
// Records the outcome of the calling thread's API call (src/api's apiCall): its error text, or "" when it succeeded.
void setThreadCallError(const std::string& text);
// setThreadCallError("") for a call that succeeded, without the string work on the latency path.
void clearThreadCallError();

}  // namespace braid

#define BRAID_WARN(...) ::braid::logMessage(::braid::LogLevel::kWarn, ::braid::kLogAll, __FILE__, __LINE__, __VA_ARGS__)
#define BRAID_ATTN(...) ::braid::logMessage(::braid::LogLevel::kAttn, ::braid::kLogAll, __FILE__, __LINE__, __VA_ARGS__)
#define BRAID_INFO(subsys, ...)                                                                 \
  do {                                                                                          \
    if (::braid::logEnabled(::braid::LogLevel::kInfo, (subsys)))                                \
      ::braid::logMessage(::braid::LogLevel::kInfo, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define BRAID_TRACE(subsys, ...)                                                                 \
  do {                                                                                           \
    if (::braid::logEnabled(::braid::LogLevel::kTrace, (subsys)))                                \
      ::braid::logMessage(::braid::LogLevel::kTrace, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
