// braidrun: starts the local processes of one command as the ranks of a job, torchrun style.
//
//   braidrun -np N [--nnodes H --node-rank I --master-addr A] [--master-port P] [--] cmd args...
//
// Each child gets RANK (node_rank * N + local rank), WORLD_SIZE (H * N), LOCAL_RANK, LOCAL_WORLD_SIZE (N),
// GROUP_RANK (node rank, torchrun's name), MASTER_ADDR and MASTER_PORT. On one node (the default) MASTER_ADDR is
// 127.0.0.1 and MASTER_PORT a free port below the kernel's ephemeral range (so no other program's outgoing
// connection can take it before rank 0 binds it) unless --master-port is given; across nodes one braidrun runs on each
// node with the same --nnodes, --master-addr (node 0's address, where rank 0 listens) and --master-port, which default
// to $MASTER_ADDR, $MASTER_PORT and $NODE_RANK. Children's output goes straight to braidrun's stdout/stderr. Each
// child leads its own process group; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to braidrun are
// forwarded to every group. When a child exits with a non-zero status or dies from a signal, braidrun reports it,
// sends SIGTERM to the others, and SIGKILL to those still alive 5 s later. The rank it names is the one that failed
// first: a rank whose peer died exits with an error a moment later (that is how the library reports a dead peer), and
// its exit may be reaped first, so for 300 ms after the first failure a rank killed by a signal takes the blame from
// one that merely exited with an error. braidrun's exit status is the named failure's (128 + signal number for a
// signal), 0 when every rank succeeded. Children also get SIGTERM if braidrun
// itself dies. On one node braidrun gives the job a fresh BRAID_BOOTSTRAP_SECRET (unless one is set), so the ranks'
// bootstrap refuses connections from anyone else; across nodes set the same one on every node. braidrun does not
// reach other nodes: their ranks learn of a failure through the library (a dead peer is
// an ncclRemoteError naming its rank, within BRAID_TIMEOUT) and their own braidrun then stops the rest of that node.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/common/free_port.h"

namespace {

constexpr const char* kMasterAddr = "127.0.0.1";
constexpr auto kKillGrace = std::chrono::seconds(5);
constexpr auto kBlameWindow = std::chrono::milliseconds(300);
constexpr long kPollNanoseconds = 100 * 1000 * 1000;
constexpr int kMaxProcesses = 4096;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};  // passed on to every rank

struct Options {
  int nprocs = 0;           // ranks on this node
  int nnodes = 1;           // braidruns in the job, one per node
  int nodeRank = -1;        // -1: $NODE_RANK across nodes, else 0
  std::string masterAddr;   // empty: $MASTER_ADDR across nodes, 127.0.0.1 on one
  int masterPort = 0;       // 0: $MASTER_PORT across nodes, a free port on one
  bool bindToCore = false;  // --bind-to core: local rank i on the i-th CPU of braidrun's affinity mask
  std::vector<char*> command;
};

struct Child {
  pid_t pid = -1;
  int rank = 0;
  bool running = false;
};

void usage(FILE* out) {
  std::fprintf(
      out,
      "Usage: braidrun -np N [--nnodes H --node-rank I --master-addr A] [--master-port P] [--bind-to none|core]\n"
      "                [--] command [args...]\n"
      "Starts N local processes of command with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
      "MASTER_ADDR and MASTER_PORT set.\n"
      "  One node (default): ranks 0..N-1, MASTER_ADDR=127.0.0.1, MASTER_PORT a free port unless given.\n"
      "  Several nodes: run one braidrun per node with the same -np, --nnodes H, --master-addr (node 0's\n"
      "  address; rank 0 listens there) and --master-port, and --node-rank 0..H-1. This node's ranks are\n"
      "  I*N .. I*N+N-1 of WORLD_SIZE=H*N. --master-addr, --master-port and --node-rank default to\n"
      "  $MASTER_ADDR, $MASTER_PORT and $NODE_RANK. Example, two nodes of 8 ranks:\n"
      "    nodeA$ braidrun -np 8 --nnodes 2 --node-rank 0 --master-addr nodeA --master-port 29500 -- prog\n"
      "    nodeB$ braidrun -np 8 --nnodes 2 --node-rank 1 --master-addr nodeA --master-port 29500 -- prog\n"
      "  (-np is also --nproc-per-node; torchrun's underscore spellings are accepted.)\n"
      "--bind-to core binds local rank i to the i-th CPU braidrun may use (as mpirun's), when there are enough;\n"
      "the default, none, leaves the ranks to the scheduler.\n"
      "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to the ranks. If a rank fails,\n"
      "this node's other ranks are terminated (SIGTERM, then SIGKILL after 5 s) and braidrun exits with the\n"
      "failed rank's status (128+N for signal N). Ranks on other nodes fail through the library\n"
      "(ncclRemoteError naming the dead rank, bounded by BRAID_TIMEOUT) and their braidrun stops the rest\n"
      "of their node.\n");
}

bool parseInt(const char* text, int minValue, int maxValue, int* out) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < minValue || v > maxValue) return false;
  *out = static_cast<int>(v);
  return true;
}

const char* envOrNull(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// Fills the multi-node settings from $NODE_RANK, $MASTER_ADDR and $MASTER_PORT where the flags left them out, and
// checks they fit together. Returns -1 to continue, otherwise the exit status.
int resolveNodes(Options* opts) {
  if (opts->nodeRank < 0) {
    opts->nodeRank = 0;
    const char* v = opts->nnodes > 1 ? envOrNull("NODE_RANK") : nullptr;
    if (v != nullptr) {
      if (!parseInt(v, 0, kMaxProcesses - 1, &opts->nodeRank)) {
        std::fprintf(stderr, "braidrun: NODE_RANK='%s' is not a node rank\n", v);
        return 2;
      }
    }
  }
  if (opts->nodeRank >= opts->nnodes) {
    std::fprintf(stderr, "braidrun: --node-rank %d is not below --nnodes %d\n", opts->nodeRank, opts->nnodes);
    return 2;
  }
  if (opts->nnodes == 1) {
    if (opts->masterAddr.empty()) opts->masterAddr = kMasterAddr;
    return -1;
  }
  // Across nodes every braidrun must name the same rendezvous: nothing is guessed.
  if (opts->masterAddr.empty()) {
    const char* v = envOrNull("MASTER_ADDR");
    if (v == nullptr) {
      std::fprintf(stderr, "braidrun: --nnodes %d needs --master-addr (node 0's address) or MASTER_ADDR\n",
                   opts->nnodes);
      return 2;
    }
    opts->masterAddr = v;
  }
  if (opts->masterPort == 0) {
    const char* v = envOrNull("MASTER_PORT");
    if (v == nullptr || !parseInt(v, 1, 65535, &opts->masterPort)) {
      std::fprintf(stderr, "braidrun: --nnodes %d needs --master-port (the same on every node) or MASTER_PORT\n",
                   opts->nnodes);
      return 2;
    }
  }
  return -1;
}

// Returns -1 to continue, otherwise the exit status.
int parseArgs(int argc, char** argv, Options* opts) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      if (arg.compare(0, prefix.size(), prefix) == 0) return argv[i] + prefix.size();
      if (i + 1 >= argc) return nullptr;
      return argv[++i];
    };
    auto is = [&](const char* name) { return arg == name || arg.rfind(std::string(name) + "=", 0) == 0; };
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else if (is("-np") || is("--np") || is("-n") || is("--nproc") || is("--nproc-per-node") ||
               is("--nproc_per_node")) {
      const std::string name = arg.substr(0, arg.find('='));
      if (!parseInt(value(name.c_str()), 1, kMaxProcesses, &opts->nprocs)) {
        std::fprintf(stderr, "braidrun: %s needs a process count between 1 and %d\n", name.c_str(), kMaxProcesses);
        return 2;
      }
    } else if (is("--master-port") || is("--master_port")) {
      const std::string name = arg.substr(0, arg.find('='));
      if (!parseInt(value(name.c_str()), 1, 65535, &opts->masterPort)) {
        std::fprintf(stderr, "braidrun: --master-port needs a port between 1 and 65535\n");
        return 2;
      }
    } else if (is("--nnodes")) {
      if (!parseInt(value("--nnodes"), 1, kMaxProcesses, &opts->nnodes)) {
        std::fprintf(stderr, "braidrun: --nnodes needs a node count between 1 and %d\n", kMaxProcesses);
        return 2;
      }
    } else if (is("--node-rank") || is("--node_rank")) {
      const std::string name = arg.substr(0, arg.find('='));
      if (!parseInt(value(name.c_str()), 0, kMaxProcesses - 1, &opts->nodeRank)) {
        std::fprintf(stderr, "braidrun: %s needs a node rank between 0 and %d\n", name.c_str(), kMaxProcesses - 1);
        return 2;
      }
    } else if (is("--bind-to") || is("--bind_to")) {
      const std::string name = arg.substr(0, arg.find('='));
      const char* v = value(name.c_str());
      if (v == nullptr || (std::strcmp(v, "none") != 0 && std::strcmp(v, "core") != 0)) {
        std::fprintf(stderr, "braidrun: %s needs none or core, not '%s'\n", name.c_str(), v == nullptr ? "" : v);
        return 2;
      }
      opts->bindToCore = std::strcmp(v, "core") == 0;
    } else if (is("--master-addr") || is("--master_addr")) {
      const std::string name = arg.substr(0, arg.find('='));
      const char* v = value(name.c_str());
      if (v == nullptr || *v == '\0') {
        std::fprintf(stderr, "braidrun: %s needs an address\n", name.c_str());
        return 2;
      }
      opts->masterAddr = v;
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "braidrun: unknown option '%s' (put -- before the command if it is the command's)\n",
                   arg.c_str());
      return 2;
    } else {
      break;
    }
  }
  for (; i < argc; ++i) opts->command.push_back(argv[i]);
  opts->command.push_back(nullptr);
  if (opts->nprocs == 0 || opts->command.size() < 2) {
    usage(stderr);
    return 2;
  }
  return resolveNodes(opts);
}

std::string signalName(int sig) {
  struct Named {
    int sig;
    const char* name;
  };
  static const Named kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"},
      {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
      {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
      {SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
      {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
  };
  for (const Named& n : kNames) {
    if (n.sig == sig) return n.name;
  }
  return "SIG" + std::to_string(sig);
}

// `bytes` random bytes from /dev/urandom as hex; empty when it cannot be read.
std::string randomHex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  FILE* f = std::fopen("/dev/urandom", "rb");
  const bool ok = f != nullptr && std::fread(raw.data(), 1, bytes, f) == bytes;
  if (f != nullptr) std::fclose(f);
  if (!ok) return std::string();
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : raw) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

void onSigchld(int) {}  // SIGCHLD must not be ignored, or finished children could not be waited for

class Launcher {
 public:
  explicit Launcher(const Options& opts) : opts_(opts) {}

  int run() {
    int port = opts_.masterPort;
    if (port == 0) port = braid::pickRendezvousPort(kMasterAddr);
    if (port <= 0) {
      std::fprintf(stderr, "braidrun: cannot find a free TCP port on %s: %s\n", kMasterAddr, std::strerror(errno));
      return 1;
    }
    port_ = std::to_string(port);
    // One node: a fresh secret for this job, so the ranks' bootstrap authenticates every connection (strangers on
    // MASTER_PORT are refused). Across nodes every braidrun would pick a different one: the user's is passed on.
    const char* secret = std::getenv("BRAID_BOOTSTRAP_SECRET");
    if (opts_.nnodes == 1 && (secret == nullptr || *secret == '\0')) {
      const std::string fresh = randomHex(32);
      if (!fresh.empty()) setenv("BRAID_BOOTSTRAP_SECRET", fresh.c_str(), 1);
    }

    // Signals are taken synchronously with sigtimedwait; children get the original mask back before exec.
    struct sigaction sa {};
    sa.sa_handler = onSigchld;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, nullptr);
    sigemptyset(&handled_);
    sigaddset(&handled_, SIGCHLD);
    for (int sig : kForwarded) sigaddset(&handled_, sig);
    sigprocmask(SIG_BLOCK, &handled_, &originalMask_);
    std::fflush(stdout);
    std::fflush(stderr);

    const pid_t self = getpid();
    if (opts_.nnodes > 1) where_ = " (node " + std::to_string(opts_.nodeRank) + ")";
    if (opts_.bindToCore) {
      // As mpirun --bind-to core: local rank i gets the i-th CPU braidrun may use, when every rank gets its own.
      if (cpu_set_t allowed; sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
          if (CPU_ISSET(c, &allowed)) cpus_.push_back(c);
        }
      }
      if (static_cast<int>(cpus_.size()) < opts_.nprocs) {
        std::fprintf(stderr, "braidrun%s: --bind-to core: %d ranks but %zu CPUs; leaving the ranks unbound\n",
                     where_.c_str(), opts_.nprocs, cpus_.size());
        cpus_.clear();
      }
    }
    children_.resize(static_cast<size_t>(opts_.nprocs));
    for (int local = 0; local < opts_.nprocs && !terminating_; ++local) {
      Child& c = children_[static_cast<size_t>(local)];
      c.rank = opts_.nodeRank * opts_.nprocs + local;
      c.pid = fork();
      if (c.pid < 0) {
        std::fprintf(stderr, "braidrun%s: cannot start rank %d: %s\n", where_.c_str(), c.rank, std::strerror(errno));
        recordFailure(1);
        startTermination();
        break;
      }
      if (c.pid == 0) execChild(c.rank, local, self);
      setpgid(c.pid, c.pid);  // also here, so the group exists before any signal is sent to it
      c.running = true;
      ++running_;
    }
    superviseUntilDone();
    return exitStatus_;
  }

 private:
  [[noreturn]] void execChild(int rank, int localRank, pid_t parent) {
    // Each rank leads its own process group, so a signal reaches whatever it started (a wrapper script's
    // children too), and it is terminated if braidrun itself dies.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    signal(SIGCHLD, SIG_DFL);
    sigprocmask(SIG_SETMASK, &originalMask_, nullptr);
    if (!cpus_.empty()) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus_[static_cast<size_t>(localRank)], &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0) {
        std::fprintf(stderr, "braidrun%s: rank %d: cannot bind to CPU %d: %s\n", where_.c_str(), rank,
                     cpus_[static_cast<size_t>(localRank)], std::strerror(errno));
      }
    }
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(opts_.nnodes * opts_.nprocs).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(localRank).c_str(), 1);
    setenv("LOCAL_WORLD_SIZE", std::to_string(opts_.nprocs).c_str(), 1);
    setenv("GROUP_RANK", std::to_string(opts_.nodeRank).c_str(), 1);
    setenv("MASTER_ADDR", opts_.masterAddr.c_str(), 1);
    setenv("MASTER_PORT", port_.c_str(), 1);
    execvp(opts_.command[0], opts_.command.data());
    std::fprintf(stderr, "braidrun%s: rank %d: cannot run %s: %s\n", where_.c_str(), rank, opts_.command[0],
                 std::strerror(errno));
    std::fflush(stderr);
    _exit(127);
  }

  void signalRunning(int sig) {
    for (const Child& c : children_) {
      if (c.running) kill(-c.pid, sig);
    }
  }

  // A failure of braidrun's own (a fork that failed): reported at once.
  void recordFailure(int status) {
    if (!failed_) {
      failed_ = true;
      reported_ = true;
      exitStatus_ = status;
    }
  }

  // A rank that failed: the first opens the blame window; within it a signal death replaces an error exit.
  void considerFailure(const Child& c, int code, int sig) {
    if (reported_) return;
    if (!failed_) {
      failed_ = true;
      blameDeadline_ = std::chrono::steady_clock::now() + kBlameWindow;
    } else if (sig == 0 || blamed_.sig != 0) {
      return;
    }
    blamed_ = Blame{c.rank, c.pid, code, sig};
  }

  // Names the blamed rank and stops the others once the window has closed (or nobody is left to wait for).
  void reportWhenDue() {
    if (!failed_ || reported_) return;
    if (running_ > 0 && std::chrono::steady_clock::now() < blameDeadline_) return;
    reported_ = true;
    exitStatus_ = blamed_.code;
    if (blamed_.sig != 0) {
      std::fprintf(stderr, "braidrun%s: rank %d (pid %d) killed by signal %s\n", where_.c_str(), blamed_.rank,
                   static_cast<int>(blamed_.pid), signalName(blamed_.sig).c_str());
    } else {
      std::fprintf(stderr, "braidrun%s: rank %d (pid %d) exited with status %d\n", where_.c_str(), blamed_.rank,
                   static_cast<int>(blamed_.pid), blamed_.code);
    }
    startTermination();
  }

  void startTermination() {
    if (terminating_) return;
    terminating_ = true;
    signalRunning(SIGTERM);
    killDeadline_ = std::chrono::steady_clock::now() + kKillGrace;
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (Child& c : children_) {
        if (!c.running || c.pid != pid) continue;
        c.running = false;
        --running_;
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
          considerFailure(c, WEXITSTATUS(status), 0);
        } else if (WIFSIGNALED(status)) {
          considerFailure(c, 128 + WTERMSIG(status), WTERMSIG(status));
        }
      }
    }
  }

  void superviseUntilDone() {
    bool killed = false;
    while (running_ > 0) {
      timespec timeout{0, kPollNanoseconds};
      const int sig = sigtimedwait(&handled_, nullptr, &timeout);
      if (sig > 0 && sig != SIGCHLD) signalRunning(sig);
      reap();
      reportWhenDue();
      if (terminating_ && !killed && running_ > 0 && std::chrono::steady_clock::now() >= killDeadline_) {
        std::fprintf(stderr, "braidrun%s: %d rank(s) still running %lld s after SIGTERM; sending SIGKILL\n",
                     where_.c_str(), running_, static_cast<long long>(kKillGrace.count()));
        signalRunning(SIGKILL);
        killed = true;
      }
    }
  }

  const Options& opts_;
  std::string port_;
  std::string where_;      // " (node I)" in messages of a multi-node job
  std::vector<int> cpus_;  // --bind-to core: local rank i runs on cpus_[i] (empty: unbound)
  std::vector<Child> children_;
  int running_ = 0;
  struct Blame {
    int rank = -1;
    pid_t pid = 0;
    int code = 0;
    int sig = 0;  // 0: exited with status `code`
  };
  bool failed_ = false;    // some rank failed
  bool reported_ = false;  // ... and braidrun named it (blamed_) and began stopping the others
  Blame blamed_;
  std::chrono::steady_clock::time_point blameDeadline_;
  bool terminating_ = false;
  int exitStatus_ = 0;
  std::chrono::steady_clock::time_point killDeadline_;
  sigset_t handled_;
  sigset_t originalMask_;
};

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  const int parsed = parseArgs(argc, argv, &opts);
  if (parsed >= 0) return parsed;
  return Launcher(opts).run();
}
