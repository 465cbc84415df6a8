#include "src/common/env_plugin.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "include/nccl_env.h"
#include "src/common/dyn_lib.h"
#include "src/common/logging.h"

namespace braid {
namespace {

// Calls into the plugin in flight, in any thread: the plugin's log lines (from the calling thread or a helper of
// its own) wait in the pending list meanwhile, since the call may run inside a knob read of the logger's own
// initialization, under its lock.
std::atomic<int> inPluginCalls{0};

struct PendingLine {
  LogLevel level;
  uint64_t subsys;
  std::string file;
  int line;
  std::string text;
};

struct EnvPluginState {
  std::mutex callMu;  // one call into the plugin at a time; guards `finalized`
  std::mutex logMu;   // guards `pending`
  std::vector<PendingLine> pending;
  std::atomic<bool> anyPending{false};  // lets every knob read skip the lock when there is nothing to print
  std::atomic<bool> active{false};      // set once, after init() succeeded
  bool finalized = false;
  const ncclEnv_v1_t* v1 = nullptr;
  const ncclEnv_v2_t* v2 = nullptr;
  std::string label;
  Status status;  // why the plugin NCCL_ENV_PLUGIN names is not used (written once, before anyone reads it)
};

EnvPluginState& state() {
  // Never destroyed: knobs may be read while the process exits.
  static EnvPluginState* s = [] {
    // A child forked while another thread held a lock would otherwise deadlock on its first knob.
    pthread_atfork(nullptr, nullptr, [] {
      new (&state().callMu) std::mutex();
      new (&state().logMu) std::mutex();
    });
    return new EnvPluginState();
  }();
  return *s;
}

void defer(LogLevel level, uint64_t subsys, const char* file, int line, std::string text) {
  EnvPluginState& s = state();
  std::lock_guard<std::mutex> lock(s.logMu);
  s.pending.push_back(PendingLine{level, subsys, file, line, std::move(text)});
  s.anyPending.store(true, std::memory_order_release);
}

void pluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  const auto lvl = static_cast<LogLevel>(level);
  const char* where = file != nullptr ? file : "env plugin";
  if (inPluginCalls.load(std::memory_order_acquire) > 0) {
    defer(lvl, flags, where, line, buf);
    return;
  }
  if (lvl != LogLevel::kWarn && !logEnabled(lvl, flags)) return;
  logMessage(lvl, flags, where, line, "%s", buf);
}

struct InPlugin {
  InPlugin() { inPluginCalls.fetch_add(1, std::memory_order_acq_rel); }
  ~InPlugin() { inPluginCalls.fetch_sub(1, std::memory_order_acq_rel); }
};

void finalizeAtExit() {
  EnvPluginState& s = state();
  std::lock_guard<std::mutex> lock(s.callMu);
  if (s.finalized) return;
  s.finalized = true;
  InPlugin in;
  (void)(s.v2 != nullptr ? s.v2->finalize() : s.v1->finalize());
  // Lines it logged are dropped: the logger may be gone by now.
}

}  // namespace

void envPluginLoad(const std::string& spec, const std::string& specSource) {
  EnvPluginState& s = state();
  if (spec == "none") return;
  const bool named = !spec.empty();
  auto refuse = [&](const std::string& why) {
    if (!named) {
      defer(LogLevel::kInfo, kLogInit | kLogEnv, __FILE__, __LINE__,
            "ENV/Plugin: no env plugin (" + why + "): knobs come from the environment");
      return;
    }
    s.status = invalidArgument(
        "NCCL_ENV_PLUGIN=\"%s\" (from %s) is not used: %s. Knobs come from the process environment instead; fix the "
        "plugin, or set NCCL_ENV_PLUGIN=none to run without one",
        spec.c_str(), specSource.c_str(), why.c_str());
    // INFO: the communicators' init fails with this text (a WARN there), and a WARN printed here, later, on whichever
    // thread reads a knob next, would replace the process's last error at a moment nobody chose.
    defer(LogLevel::kInfo, kLogInit | kLogEnv, __FILE__, __LINE__, s.status.message());
  };
  std::string path, failures;
  void* handle = openPluginLibrary(pluginCandidates("nccl-env", spec), &path, &failures);
  if (handle == nullptr) return refuse(failures);
  s.v2 = static_cast<const ncclEnv_v2_t*>(dlsym(handle, "ncclEnvPlugin_v2"));
  if (s.v2 == nullptr) s.v1 = static_cast<const ncclEnv_v1_t*>(dlsym(handle, "ncclEnvPlugin_v1"));
  if (s.v2 == nullptr && s.v1 == nullptr) {
    dlclose(handle);
    return refuse(path + " exports neither ncclEnvPlugin_v2 nor ncclEnvPlugin_v1");
  }
  const char* name = s.v2 != nullptr ? s.v2->name : s.v1->name;
  const int version = s.v2 != nullptr ? 2 : 1;
  const bool complete = s.v2 != nullptr ? s.v2->init != nullptr && s.v2->finalize != nullptr && s.v2->getEnv != nullptr
                                        : s.v1->init != nullptr && s.v1->finalize != nullptr && s.v1->getEnv != nullptr;
  if (!complete) return refuse(strPrintf("%s's ncclEnvPlugin_v%d has a NULL function", path.c_str(), version));
  ncclResult_t rc;
  {
    InPlugin in;
    rc = s.v2 != nullptr ? s.v2->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, pluginLogger)
                         : s.v1->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX);
  }
  // A library whose init failed stays loaded: it may have started something that still runs its code.
  if (rc != ncclSuccess) return refuse(strPrintf("%s: init returned %d", path.c_str(), static_cast<int>(rc)));
  s.label = strPrintf("env plugin %s (v%d)", name != nullptr ? name : "(unnamed)", version);
  defer(LogLevel::kInfo, kLogInit | kLogEnv, __FILE__, __LINE__,
        strPrintf("ENV/Plugin: using %s from %s: it answers for every knob", s.label.c_str(), path.c_str()));
  std::atexit(finalizeAtExit);
  s.active.store(true, std::memory_order_release);
}

EnvPluginAnswer envPluginGet(const char* name) {
  EnvPluginAnswer a;
  EnvPluginState& s = state();
  if (!s.active.load(std::memory_order_acquire)) return a;
  std::lock_guard<std::mutex> lock(s.callMu);
  if (s.finalized) return a;
  InPlugin in;
  const char* v = s.v2 != nullptr ? s.v2->getEnv(name) : s.v1->getEnv(name);
  if (v != nullptr) {
    a.found = true;
    a.text = v;
  }
  return a;
}

std::string envPluginLabel() {
  EnvPluginState& s = state();
  return s.active.load(std::memory_order_acquire) ? s.label : std::string();
}

Status envPluginStatus() {
  return state().status;
}

void envPluginFlushLog() {
  EnvPluginState& s = state();
  if (!s.anyPending.load(std::memory_order_acquire) || logInitializingOnThisThread() ||
      inPluginCalls.load(std::memory_order_acquire) > 0) {
    return;
  }
  std::vector<PendingLine> lines;
  {
    std::lock_guard<std::mutex> lock(s.logMu);
    lines.swap(s.pending);
    s.anyPending.store(false, std::memory_order_relaxed);
  }
  for (const PendingLine& l : lines) {
    if (l.level != LogLevel::kWarn && !logEnabled(l.level, l.subsys)) continue;
    logMessage(l.level, l.subsys, l.file.c_str(), l.line, "%s", l.text.c_str());
  }
}

}  // namespace braid
