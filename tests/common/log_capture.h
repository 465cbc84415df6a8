// NCCL_DEBUG=INFO lines of some subsystems, captured to a file per process while a LogCapture lives, for tests that
// read what braid logged (its decisions, at INFO).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "nccl.h"
#include "tests/common/harness.h"

namespace braid_test {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit: the only way to reopen the log

class LogCapture {
 public:
  // `subsystems` as NCCL_DEBUG_SUBSYS takes them ("INIT", "INIT,REG,COLL").
  explicit LogCapture(const char* subsystems = "INIT") {
    char path[] = "/tmp/braid-log-XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    base_ = path;
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", subsystems, 1);
    setenv("NCCL_DEBUG_FILE", (base_ + ".%p").c_str(), 1);
    ncclResetDebugInit();
  }
  ~LogCapture() {
    stop();
    unlink((base_ + "." + std::to_string(getpid())).c_str());
    unlink(base_.c_str());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // Ends the capture (the file is closed, and a later reset would truncate it).
  void stop() {
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_SUBSYS");
    unsetenv("NCCL_DEBUG_FILE");
    ncclResetDebugInit();
  }
  // In a forked child: its own file (the %p in the name is the child's pid once the log reopens).
  static void reopenInChild() { ncclResetDebugInit(); }
  // What process `pid` logged (the file is removed).
  std::string textOf(pid_t pid) {
    stop();
    const std::string f = base_ + "." + std::to_string(pid);
    std::string t = readFileText(f);
    unlink(f.c_str());
    return t;
  }

 private:
  std::string base_;
};

#pragma GCC diagnostic pop

// How many times `what` occurs in `text`.
inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace braid_test
