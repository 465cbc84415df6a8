#include "tools/info/flight_cli.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "src/common/logging.h"
#include "src/common/params.h"
#include "tools/info/flight_report.h"

namespace braid {
namespace {

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

// The value of `name` in a process's environment ("" when unset or unreadable).
std::string environOf(int pid, const char* name) {
  std::string env;
  if (!readFile("/proc/" + std::to_string(pid) + "/environ", &env)) return "";
  const std::string key = std::string(name) + "=";
  size_t pos = 0;
  while (pos < env.size()) {
    const size_t end = env.find('\0', pos);
    const std::string entry = env.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (entry.compare(0, key.size(), key) == 0) return entry.substr(key.size());
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

// Whether the process has a handler for `sig` (SigCgt in /proc/<pid>/status).
bool catches(int pid, int sig) {
  std::string status;
  if (!readFile("/proc/" + std::to_string(pid) + "/status", &status)) return false;
  const size_t at = status.find("SigCgt:");
  if (at == std::string::npos) return false;
  const unsigned long long mask = strtoull(status.c_str() + at + 7, nullptr, 16);
  return ((mask >> (sig - 1)) & 1) != 0;
}

bool mapsLibnccl(int pid) {
  std::string maps;
  return readFile("/proc/" + std::to_string(pid) + "/maps", &maps) && maps.find("libnccl.so") != std::string::npos;
}

// The file's identity before the dump (a dump is renamed into place, so a new one has a new inode).
ino_t inodeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

int dumpOne(int pid) {
  // Its environment as it started; a program that set the knob itself (setenv before its first communicator) has
  // it only in memory, and then this tool's own setting names the file.
  std::string pattern = environOf(pid, params::kFlightRecorderFile.name);
  if (pattern.empty()) pattern = params::FlightRecorderFile();
  if (pattern.empty()) {
    fprintf(stderr,
            "pid %d: %s is not set in its environment (nor here), so it writes no dump; set it when the job starts\n",
            pid, params::kFlightRecorderFile.name);
    return 1;
  }
  if (!catches(pid, SIGUSR1)) {
    fprintf(stderr,
            "pid %d: does not catch SIGUSR1 (no braid communicator yet, or the program has its own handler); not "
            "signalled, since SIGUSR1 would kill it\n",
            pid);
    return 1;
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string path = expandPathPattern(pattern, host, pid);
  const ino_t before = inodeOf(path);
  if (kill(pid, SIGUSR1) != 0) {
    fprintf(stderr, "pid %d: kill(SIGUSR1): %s\n", pid, strerror(errno));
    return 1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const ino_t now = inodeOf(path);
    if (now != 0 && now != before) {
      printf("pid %d: wrote %s\n", pid, path.c_str());
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fprintf(stderr, "pid %d: no new %s within 10 s (is the process stopped?)\n", pid, path.c_str());
  return 1;
}

}  // namespace

int flightDumpCommand(const std::vector<std::string>& pids) {
  std::vector<int> targets;
  for (const std::string& p : pids) {
    char* end = nullptr;
    const long v = strtol(p.c_str(), &end, 10);
    if (end == p.c_str() || *end != '\0' || v <= 0 || v > (1L << 30)) {
      fprintf(stderr, "braid-info --dump: \"%s\" is not a process id\n", p.c_str());
      return 2;
    }
    targets.push_back(static_cast<int>(v));
  }
  if (pids.empty()) {
    DIR* d = opendir("/proc");
    if (d == nullptr) {
      fprintf(stderr, "braid-info --dump: cannot read /proc\n");
      return 1;
    }
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long v = strtol(e->d_name, &end, 10);
      if (*end != '\0' || v <= 0 || v == getpid()) continue;
      const int pid = static_cast<int>(v);
      if (!environOf(pid, params::kFlightRecorderFile.name).empty() && mapsLibnccl(pid) && catches(pid, SIGUSR1)) {
        targets.push_back(pid);
      }
    }
    closedir(d);
    if (targets.empty()) {
      fprintf(stderr, "braid-info --dump: no process here runs braid with %s set and a SIGUSR1 handler\n",
              params::kFlightRecorderFile.name);
      return 1;
    }
  }
  int rc = 0;
  for (int pid : targets) rc |= dumpOne(pid);
  return rc;
}

int flightAnalyzeCommand(const std::vector<std::string>& paths) {
  if (paths.empty()) {
    fprintf(stderr, "braid-info --analyze: name the dump files or a directory holding them\n");
    return 2;
  }
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    struct stat st {};
    if (stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR* d = opendir(p.c_str());
      while (d != nullptr) {
        dirent* e = readdir(d);
        if (e == nullptr) break;
        const std::string name = e->d_name;
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) files.push_back(p + "/" + name);
      }
      if (d != nullptr) closedir(d);
    } else {
      files.push_back(p);
    }
  }
  int rc = 0;
  std::vector<FlightComm> comms;
  for (const std::string& f : files) {
    std::string text, error;
    if (!readFile(f, &text)) {
      fprintf(stderr, "%s: cannot read: %s\n", f.c_str(), strerror(errno));
      rc = 1;
      continue;
    }
    if (!parseFlightDump(text, f, &comms, &error)) {
      fprintf(stderr, "%s\n", error.c_str());
      rc = 1;
    }
  }
  printf("%zu dump file%s\n%s", files.size(), files.size() == 1 ? "" : "s", flightReport(comms).c_str());
  return rc;
}

}  // namespace braid
