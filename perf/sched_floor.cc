// The scheduler's floor under a small collective: N processes that each publish an arrival and wait until every
// other process has published the same one, over and over, with nothing else (no library, no data, no API). Every
// small all-reduce needs at least this much (each rank's result depends on every rank's input), so on a machine
// with fewer CPUs than processes this is the time the context switches alone cost per operation, whatever the
// library: compare it with all_reduce_perf's small sizes in the same hour (docs/perf.md).
//
//   sched_floor [-np N] [-n iters] [-w warmup] [--rounds R] [--spin S] [--bind 0|1]
//
// A waiter spins S times (pause), then yields the CPU at every further check (sched_yield), as braid's waits and
// Open MPI's progress loop with oversubscription do; --spin 0 yields at once. --bind 1 puts process r on the
// (r mod C)-th of the C CPUs it may use (braid's placement of rank threads); 0 leaves placement to the scheduler.
// Prints, per round, the mean time per exchange, then min / median / max over the rounds. A process that waits 30 s
// for one arrival (a peer died) gives up, and the run fails.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "src/common/wait.h"  // cpuRelax: the pause braid's own waits spin with

namespace {

struct alignas(64) Arrival {
  std::atomic<uint64_t> gen{0};
};

struct Options {
  int np = 4;
  long iters = 20000;
  long warmup = 1000;
  int rounds = 5;
  int spin = 20;
  bool bind = true;
};

[[noreturn]] void usage(const char* why) {
  fprintf(stderr,
          "sched_floor: %s\nusage: sched_floor [-np N] [-n iters] [-w warmup] [--rounds R] [--spin S] [--bind 0|1]\n",
          why);
  exit(2);
}

long number(const char* flag, const char* text, long lo, long hi) {
  char* end = nullptr;
  const long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) {
    usage((std::string(flag) + "=" + text + ": expected an integer from " + std::to_string(lo) + " to " +
           std::to_string(hi))
              .c_str());
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "-np") {
      o.np = static_cast<int>(number("-np", v, 2, 256));
    } else if (a == "-n") {
      o.iters = number("-n", v, 1, 1L << 30);
    } else if (a == "-w") {
      o.warmup = number("-w", v, 0, 1L << 30);
    } else if (a == "--rounds") {
      o.rounds = static_cast<int>(number("--rounds", v, 1, 1000));
    } else if (a == "--spin") {
      o.spin = static_cast<int>(number("--spin", v, 0, 1 << 30));
    } else if (a == "--bind") {
      o.bind = number("--bind", v, 0, 1) != 0;
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  return o;
}

constexpr double kStallSeconds = 30;  // a process that waits this long for one arrival gives up (a peer died)

// One process's part: `count` exchanges after `base`; returns the seconds they took, or -1 when a peer stalled.
double exchange(Arrival* all, int np, int me, uint64_t base, long count, int spin) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t g = base + 1; g <= base + static_cast<uint64_t>(count); ++g) {
    all[me].gen.store(g, std::memory_order_release);
    for (int p = 0; p < np; ++p) {
      std::chrono::steady_clock::time_point since{};
      for (long n = 0; all[p].gen.load(std::memory_order_acquire) < g; ++n) {
        if (n < spin) {
          braid::cpuRelax();
          continue;
        }
        sched_yield();
        if ((n - spin) % 4096 != 0) continue;  // the clock only now and then: it costs as much as an arrival
        const auto now = std::chrono::steady_clock::now();
        if (n == spin) {
          since = now;
        } else if (std::chrono::duration<double>(now - since).count() > kStallSeconds) {
          fprintf(stderr, "sched_floor: process %d waited %.0f s for process %d's arrival %llu: giving up\n", me,
                  kStallSeconds, p, static_cast<unsigned long long>(g));
          return -1;
        }
      }
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // The CPUs this process may use (a cpuset or taskset may leave fewer than are online), in order.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpuList;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpuList.push_back(c);
    }
  }
  if (cpuList.empty()) {
    fprintf(stderr, "sched_floor: cannot read this process's CPUs (sched_getaffinity)\n");
    return 1;
  }
  const long cpus = static_cast<long>(cpuList.size());
  // Every process's arrival, on a line of its own.
  const size_t bytes = sizeof(Arrival) * static_cast<size_t>(o.np);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    perror("sched_floor: mmap");
    return 1;
  }
  Arrival* all = new (mem) Arrival[o.np];
  std::vector<pid_t> kids;
  int me = 0;
  for (int r = 1; r < o.np; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      perror("sched_floor: fork");
      for (pid_t k : kids) kill(k, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      me = r;
      kids.clear();
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a parent that dies takes its spinning children with it
      if (getppid() == 1) _exit(1);
      break;
    }
    kids.push_back(pid);
  }
  if (o.bind) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpuList[static_cast<size_t>(me) % cpuList.size()], &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      perror("sched_floor: sched_setaffinity (try --bind 0)");
      if (me != 0) _exit(1);
      for (pid_t k : kids) kill(k, SIGKILL);
      return 1;
    }
  }
  const uint64_t perRound = static_cast<uint64_t>(o.warmup + o.iters);
  std::vector<double> us;
  bool stalled = false;
  for (int round = 0; round < o.rounds && !stalled; ++round) {
    const uint64_t base = perRound * static_cast<uint64_t>(round);
    const double w = exchange(all, o.np, me, base, o.warmup, o.spin);
    const double s = w < 0 ? -1 : exchange(all, o.np, me, base + static_cast<uint64_t>(o.warmup), o.iters, o.spin);
    stalled = s < 0;
    us.push_back(s * 1e6 / static_cast<double>(o.iters));
  }
  if (me != 0) _exit(stalled ? 1 : 0);
  if (stalled) {
    for (pid_t k : kids) kill(k, SIGKILL);
    for (pid_t k : kids) waitpid(k, nullptr, 0);
    return 1;
  }
  int failed = 0;
  for (pid_t k : kids) {
    int status = 0;
    if (waitpid(k, &status, 0) != k || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  printf("# sched_floor: %d processes on %ld CPUs, spin %d then yield, %s, %ld exchanges per round\n", o.np, cpus,
         o.spin, o.bind ? "bound (process r on the (r mod CPUs)-th CPU it may use)" : "unbound", o.iters);
  printf("# round   us/exchange\n");
  for (size_t i = 0; i < us.size(); ++i) printf("%7zu %13.2f\n", i, us[i]);
  std::vector<double> sorted = us;
  std::sort(sorted.begin(), sorted.end());
  printf("# min / median / max: %.2f / %.2f / %.2f us\n", sorted.front(), sorted[sorted.size() / 2], sorted.back());
  return failed == 0 ? 0 : 1;
}
