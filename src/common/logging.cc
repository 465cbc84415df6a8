#include "src/common/logging.h"

#include <pthread.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include "src/common/params.h"
#include "src/common/status.h"

namespace braid {
namespace {

struct LogState {
  std::mutex mu;
  bool initialized = false;
  LogLevel level = LogLevel::kNone;
  uint64_t subsys = kLogInit | kLogBootstrap | kLogEnv;
  FILE* file = stdout;
  bool ownsFile = false;
  char host[64] = "";
  std::chrono::steady_clock::time_point start;
  std::string lastError;
};

LogState& state() {
  static LogState* s = [] {
    // A child forked while another thread was logging must not inherit a locked mutex.
    pthread_atfork(nullptr, nullptr, [] { new (&state().mu) std::mutex(); });
    return new LogState();  // never destroyed: logging may run during static destruction
  }();
  return *s;
}

thread_local int tlsDevice = 0;

}  // namespace

std::atomic<bool> gLogDetailQuiet{false};

namespace {

// Where a level sits in verbosity (ATTN, appended last to NCCL's values, comes between WARN and INFO).
int verbosity(LogLevel l) {
  switch (l) {
    case LogLevel::kNone:
      return 0;
    case LogLevel::kVersion:
      return 1;
    case LogLevel::kWarn:
      return 2;
    case LogLevel::kAttn:
      return 3;
    case LogLevel::kInfo:
      return 4;
    case LogLevel::kAbort:
      return 5;
    case LogLevel::kTrace:
      return 6;
  }
  return 0;
}

// Whether a message of `level` for `subsys` shows under the state's settings: WARN and ATTN concern every subsystem.
bool shows(LogLevel set, uint64_t setSubsys, LogLevel level, uint64_t subsys) {
  const int v = verbosity(level);
  if (v == 0 || verbosity(set) < v) return false;  // NONE, and levels braid does not know (from a plugin), never
  return level == LogLevel::kWarn || level == LogLevel::kAttn || (setSubsys & subsys) != 0;
}

LogLevel parseLevel(const std::string& text) {
  if (strcasecmp(text.c_str(), "VERSION") == 0) return LogLevel::kVersion;
  if (strcasecmp(text.c_str(), "WARN") == 0) return LogLevel::kWarn;
  if (strcasecmp(text.c_str(), "ATTN") == 0) return LogLevel::kAttn;
  if (strcasecmp(text.c_str(), "INFO") == 0) return LogLevel::kInfo;
  if (strcasecmp(text.c_str(), "ABORT") == 0) return LogLevel::kAbort;
  if (strcasecmp(text.c_str(), "TRACE") == 0) return LogLevel::kTrace;
  return LogLevel::kNone;
}

uint64_t parseSubsys(const std::string& text) {
  static const struct {
    const char* name;
    uint64_t bit;
  } kNames[] = {{"INIT", kLogInit},
                {"COLL", kLogColl},
                {"P2P", kLogP2p},
                {"SHM", kLogShm},
                {"NET", kLogNet},
                {"GRAPH", kLogGraph},
                {"TUNING", kLogTuning},
                {"ENV", kLogEnv},
                {"ALLOC", kLogAlloc},
                {"CALL", kLogCall},
                {"PROXY", kLogProxy},
                {"NVLS", kLogNvls},
                {"BOOTSTRAP", kLogBootstrap},
                {"REG", kLogReg},
                {"PROFILE", kLogProfile},
                {"RAS", kLogRas},
                {"ALLOC_HOST", kLogAllocHost},
                {"DESTROY", kLogDestroy},
                {"ALL", kLogAll}};
  std::string s = text;
  bool invert = !s.empty() && s[0] == '^';
  if (invert) s = s.substr(1);
  uint64_t mask = 0;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& n : kNames) {
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bit;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

}  // namespace

std::string expandPathPattern(const std::string& pattern, const char* host, int pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') {
        out += host;
        ++i;
        continue;
      }
      if (c == 'p') {
        out += std::to_string(pid);
        ++i;
        continue;
      }
      if (c == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

namespace {

thread_local bool tlsInitializing = false;  // this thread holds s.mu and reads knobs (envPluginFlushLog waits)

// Caller holds s.mu.
void initLocked(LogState& s) {
  if (s.initialized) return;
  s.initialized = true;
  tlsInitializing = true;
  struct Done {
    ~Done() { tlsInitializing = false; }
  } done;
  s.start = std::chrono::steady_clock::now();
  gethostname(s.host, sizeof(s.host) - 1);
  char* dot = strchr(s.host, '.');
  if (dot != nullptr) *dot = '\0';
  s.level = parseLevel(params::Debug());
  gLogDetailQuiet.store(verbosity(s.level) < verbosity(LogLevel::kInfo), std::memory_order_relaxed);
  ParamValue sub = lookupParam(params::kDebugSubsys);
  s.subsys = parseSubsys(sub.text);
  std::string file = params::DebugFile();
  if (s.ownsFile && s.file != nullptr) fclose(s.file);
  s.file = stdout;
  s.ownsFile = false;
  if (!file.empty() && s.level > LogLevel::kNone) {
    std::string path = expandPathPattern(file, s.host, static_cast<int>(getpid()));
    FILE* f = fopen(path.c_str(), "w");
    if (f != nullptr) {
      setvbuf(f, nullptr, _IOLBF, 0);
      s.file = f;
      s.ownsFile = true;
    }
  }
}

}  // namespace

bool logInitializingOnThisThread() {
  return tlsInitializing;
}

void logReinit() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.initialized = false;
  initLocked(s);
}

bool logEnabledSlow(LogLevel level, uint64_t subsys) {
  LogState& s = state();
  if (!s.initialized) {
    std::lock_guard<std::mutex> lock(s.mu);
    initLocked(s);
  }
  return shows(s.level, s.subsys, level, subsys);
}

void logSetThreadDevice(int dev) {
  tlsDevice = dev;
}

namespace {

// The error of the calling thread's latest API call, if it failed: with ranks as threads, another rank's failure
// (logged at about the same time) must not replace it.
std::string& threadLastError() {
  thread_local std::string text;
  return text;
}
// Whether threadLastError() holds text: a plain flag, which a successful call reads with one TLS lookup (the
// string's guard and object take two).
thread_local bool tlsHasCallError = false;

}  // namespace

void logMessage(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = strVPrintf(fmt, ap);
  va_end(ap);
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  initLocked(s);
  if (level == LogLevel::kWarn) s.lastError = msg;
  if (!shows(s.level, s.subsys, level, subsys)) return;
  long tid = syscall(SYS_gettid);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  if (level == LogLevel::kWarn) {
    fprintf(s.file, "\n%s:%d:%ld [%d] %s:%d NCCL WARN %s\n", s.host, getpid(), tid, tlsDevice, base, line, msg.c_str());
  } else if (level == LogLevel::kAttn) {
    fprintf(s.file, "%s:%d:%ld [%d] %s:%d NCCL ATTN %s\n", s.host, getpid(), tid, tlsDevice, base, line, msg.c_str());
  } else if (level == LogLevel::kTrace) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s.start).count();
    fprintf(s.file, "%s:%d:%ld [%d] %f %s:%d NCCL TRACE %s\n", s.host, getpid(), tid, tlsDevice, ms, base, line,
            msg.c_str());
  } else {
    fprintf(s.file, "%s:%d:%ld [%d] NCCL INFO %s\n", s.host, getpid(), tid, tlsDevice, msg.c_str());
  }
  fflush(s.file);
}

void setThreadCallError(const std::string& text) {
  threadLastError() = text;
  tlsHasCallError = !text.empty();
}

void clearThreadCallError() {
  if (!tlsHasCallError) return;  // the common case touches nothing else
  threadLastError().clear();
  tlsHasCallError = false;
}

std::string lastErrorText() {
  if (!threadLastError().empty()) return threadLastError();
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.lastError;
}

}  // namespace braid
