// The shared driver of the perf tools: ranks as threads (and processes), buffers, timing, checking, output.
// The library measured is a Backend (braid, or an MPI/Gloo baseline); nothing here calls a library directly.
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "perf/common/backend.h"
#include "perf/common/collective.h"
#include "perf/common/cuda_runtime.h"
#include "perf/common/data_types.h"
#include "perf/common/launch.h"
#include "perf/common/options.h"
#include "perf/common/rank_buffers.h"
#include "perf/common/report.h"

namespace braid::perf {
namespace {

constexpr size_t kDeviceLineBytes = 192;  // one rank's slot when the "# Using devices" lines are gathered
constexpr size_t kMaxRotations = 4096;
constexpr int kStatusWrong = 1;
constexpr int kStatusError = 2;
constexpr int kStatusTimeout = 3;

using Clock = std::chrono::steady_clock;

// State shared by the driver threads of this process.
struct Shared {
  const CollectiveSpec* spec = nullptr;
  PerfOptions opts;
  LaunchInfo launch;
  RunInfo info;
  std::unique_ptr<Backend> backend;
  int nranks = 1;
  int ranksPerThread = 1;  // -g
  std::vector<size_t> sizes;
  std::vector<int> cpus;        // the CPUs this process may use, read before any driver thread starts
  bool libraryIsBraid = false;  // the libnccl.so.2 loaded is braid's (it exports braid's extension)
  size_t bufferBytes = 0;       // per rank, each of send and receive: the largest operation's, unalignment included
  std::atomic<int> status{0};

  std::mutex mu;
  std::condition_variable done;
  int finishedThreads = 0;

  void raiseStatus(int s) {
    int cur = status.load();
    while (s > cur && !status.compare_exchange_weak(cur, s)) {
    }
  }
};

// A failed library call ends the process (as nccl-tests does): the other ranks are blocked in collectives with
// this one and would only time out. braidrun, mpirun or srun then stop the other processes.
[[noreturn]] void fail(const Shared& s, int rank, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: rank %d: %s\n", s.spec->name, rank, message.c_str());
  std::fflush(stderr);
  std::_Exit(kStatusError);
}

inline uint64_t combineSeed(uint64_t a, uint64_t b) {
  return (a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2)));
}

// One driver thread: the -g ranks it drives, through one backend.
class ThreadRunner {
 public:
  ThreadRunner(Shared& shared, int thread)
      : s_(shared),
        thread_(thread),
        firstRank_((shared.launch.procRank * shared.opts.nThreads + thread) * shared.ranksPerThread) {}

  void run() {
    std::string error;
    boundCpu_ = bindToOwnCpu();
    const std::vector<int> devices = pickDevices();
    comms_ = s_.backend->connect(firstRank_, s_.ranksPerThread, s_.nranks, devices, &error);
    if (!comms_) fail(s_, firstRank_, error);
    const std::vector<int> places = placeBuffers(devices);
    for (int i = 0; i < s_.ranksPerThread; ++i) {
      std::unique_ptr<RankBuffers> b =
          RankBuffers::create(s_.backend.get(), firstRank_ + i, places[i], s_.bufferBytes, s_.bufferBytes,
                              s_.opts.streamNull != 0, s_.opts.plainHost, &error);
      if (!b) fail(s_, firstRank_ + i, error);
      ranks_.push_back(std::move(b));
    }
    // -R: the buffers are registered, as nccl-tests does: -R 1 each on its own, -R 2 as symmetric windows, which is
    // collective, so the ranks of this thread register in one group.
    if (s_.opts.localRegister != 0) {
      const bool windows = s_.opts.localRegister == 2;
      if (windows && !comms_->groupStart(&error)) fail(s_, firstRank_, error);
      for (int i = 0; i < s_.ranksPerThread; ++i) {
        const RankBuffers& b = *ranks_[static_cast<size_t>(i)];
        if (!comms_->registerBuffers(static_cast<size_t>(i), {{b.send(), s_.bufferBytes}, {b.recv(), s_.bufferBytes}},
                                     windows, &error)) {
          fail(s_, firstRank_ + i, error);
        }
      }
      if (windows && !comms_->groupEnd(&error)) fail(s_, firstRank_, error);
    }
    onDevice_ = ranks_[0]->onDevice();
    refuseUnsupported();
    const std::vector<std::string> lines = gatherDeviceLines();
    if (isReporter()) printDevicesAndTableHeader(stdout, lines, hostBuffersNote(), s_.opts);

    const PerfOptions& o = s_.opts;
    std::vector<RowResult> rows;
    int64_t failedChecks = 0;
    // -r -1 sweeps every root, as nccl-tests does.
    const int firstRoot = s_.spec->hasRoot && o.root < 0 ? 0 : o.root;
    const int lastRoot = s_.spec->hasRoot && o.root < 0 ? s_.nranks - 1 : o.root;
    for (int cycle = 0; o.runCycles == 0 || cycle < o.runCycles; ++cycle) {
      for (size_t ti = 0; ti < o.types.size(); ++ti) {
        for (size_t oi = 0; oi < o.ops.size(); ++oi) {
          for (int root = firstRoot; root <= lastRoot; ++root) {
            warmUp(*o.types[ti], *o.ops[oi], root);
            for (size_t si = 0; si < s_.sizes.size(); ++si) {
              const uint64_t seed =
                  combineSeed(combineSeed(combineSeed(combineSeed(cycle, ti), oi), si), static_cast<uint64_t>(root));
              RowResult row = measureRow(*o.types[ti], *o.ops[oi], root, s_.sizes[si], seed);
              failedChecks += row.outOfPlace.failedChecks + row.inPlace.failedChecks;
              if (isReporter()) printRow(stdout, row, o);
              rows.push_back(row);
            }
          }
        }
      }
    }
    const double avgBusBw = averageBusBw(rows);
    if (failedChecks != 0) s_.raiseStatus(kStatusWrong);
    if (isReporter()) {
      // Test hook (BRAID_PERF_REPORT_DELAY_MS): a slow reporter, so a test sees that no rank exits before it.
      if (const char* d = std::getenv("BRAID_PERF_REPORT_DELAY_MS"); d != nullptr && *d != '\0') {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(d)));
      }
      finishReport(rows, failedChecks, avgBusBw);
      std::fflush(stdout);
    }
    // No rank leaves before the report is out: a launcher that stops the others once one rank exits non-zero
    // (braidrun, mpirun; exit status 1 for wrong values) would otherwise cut the reporter's last rows and footer.
    sumOverRanks(std::vector<int64_t>(ranks_.size(), 0));

    if (!comms_->close(&error)) fail(s_, firstRank_, error);
    comms_.reset();
  }

 private:
  bool isReporter() const { return firstRank_ == 0; }

  // --bind cores: when the host's rank threads fit its CPUs (launchers that name the local rank and size), each
  // thread is bound to its own CPU, as mpirun binds ranks to cores. Rank threads that spin briefly and then yield
  // can settle on one CPU together and stay there while another CPU idles (docs/perf.md, "CPU binding").
  // Returns the CPU, or -1 when left unbound.
  int bindToOwnCpu() const {
    const PerfOptions& o = s_.opts;
    const long long slots = static_cast<long long>(s_.launch.localSize) * o.nThreads;
    if (!o.bindThreads || s_.launch.localSize <= 0 || slots > static_cast<long long>(s_.cpus.size())) return -1;
    const long long index = static_cast<long long>(s_.launch.localRank) * o.nThreads + thread_;
    if (index >= static_cast<long long>(s_.cpus.size())) return -1;
    const int cpu = s_.cpus[static_cast<size_t>(index)];
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0 ? cpu : -1;
  }

  // nccl-tests' GPU choice: the first device is NCCL_TESTS_DEVICE when set, else localRank x ranks per process; a
  // process's ranks take consecutive devices from there. All -1 (leave CUDA alone) for host buffers, a host-only
  // library or no CUDA device, and in auto mode for ranks beyond the last device (a host library needs none).
  std::vector<int> pickDevices() const {
    std::vector<int> devices(static_cast<size_t>(s_.ranksPerThread), -1);
    // braid runs on host memory: in auto mode no CUDA context is made for it (only --buffers device asks).
    if (s_.opts.buffers == BufferPlace::kAuto && s_.libraryIsBraid) return devices;
    const CudaRuntime* cuda =
        s_.opts.buffers == BufferPlace::kHost || !s_.backend->takesDeviceBuffers() ? nullptr : &CudaRuntime::get();
    if (cuda == nullptr || cuda->deviceCount() == 0) return devices;
    const char* first = std::getenv("NCCL_TESTS_DEVICE");
    const long long perProcess = static_cast<long long>(s_.opts.nThreads) * s_.opts.nGpus;
    const long long base =
        first != nullptr && *first != '\0' ? std::max(0ll, std::atoll(first)) : s_.launch.localRank * perProcess;
    const long long indexInProcess = firstRank_ - s_.launch.procRank * perProcess;
    if (base + perProcess > cuda->deviceCount()) {
      if (s_.opts.buffers == BufferPlace::kDevice) {
        fail(s_, firstRank_,
             "--buffers device: " + std::to_string(base + perProcess) + " devices requested but only " +
                 std::to_string(cuda->deviceCount()) +
                 " found (check the processes per host, -t, -g and NCCL_TESTS_DEVICE)");
      }
      return devices;
    }
    for (size_t i = 0; i < devices.size(); ++i) devices[i] = static_cast<int>(base + indexInProcess + i);
    return devices;
  }

  // Where each rank's buffers go (-1: host memory). auto: on the device the communicator reports, when every
  // communicator of the thread reports one (one placement per thread keeps the bookkeeping simple).
  std::vector<int> placeBuffers(const std::vector<int>& devices) const {
    std::vector<int> places(devices.size(), -1);
    bool allOnDevices = true;
    for (size_t i = 0; i < devices.size(); ++i) {
      const int reported = comms_->device(i);
      places[i] = reported >= 0 ? reported : devices[i];
      allOnDevices = allOnDevices && devices[i] >= 0 && reported >= 0;
    }
    if (s_.opts.buffers == BufferPlace::kDevice || (s_.opts.buffers == BufferPlace::kAuto && allOnDevices)) {
      return places;
    }
    return std::vector<int>(devices.size(), -1);
  }

  // Why auto chose host memory on a machine with GPUs (empty otherwise).
  std::string hostBuffersNote() const {
    if (onDevice_ || s_.opts.buffers != BufferPlace::kAuto || !s_.backend->takesDeviceBuffers() ||
        CudaRuntime::get().deviceCount() == 0) {
      return "";
    }
    if (s_.libraryIsBraid) return "# Buffers in host memory: braid's communicators run on host memory";
    return "# Buffers in host memory: the communicators report no CUDA device (ncclCommCuDevice -1)";
  }

  void check(bool ok, const std::string& error) {
    if (!ok) fail(s_, firstRank_, error);
  }

  // Every rank decides the same way, so a refusal ends every process with the same message and nothing hangs.
  // The barrier keeps the other ranks alive until the reporter has printed: a launcher that kills the survivors
  // when one rank exits (braidrun, mpirun) would otherwise swallow the message.
  void refuseUnsupported() {
    for (const TypeInfo* type : s_.opts.types) {
      for (const OpInfo* op : s_.opts.ops) {
        std::string why;
        if (!comms_->supports(s_.spec->kind, *type, *op, &why)) {
          if (isReporter()) {
            std::fprintf(stderr, "%s: --baseline %s: %s\n", s_.spec->name, s_.backend->name(), why.c_str());
          }
          std::fflush(stderr);
          barrier();
          std::_Exit(kStatusError);
        }
      }
    }
  }

  // The in-place all-reduce the driver uses for its own bookkeeping, over this thread's ranks.
  void bookkeepingAllReduce(std::vector<std::vector<char>>& perRank, size_t count, ncclDataType_t type,
                            ncclRedOp_t op) {
    std::vector<void*> bufs;
    for (auto& v : perRank) bufs.push_back(v.data());
    std::string error;
    if (onDevice_) {
      check(deviceBookkeepingAllReduce(comms_.get(), ranks_, bufs, perRank[0].size(), count, type, op, &error), error);
    } else {
      check(comms_->allReduce(bufs, count, type, op, {}, &error), error);
    }
  }

  // Waits for every rank's stream (nothing on host buffers).
  void synchronize() {
    std::string error;
    for (auto& b : ranks_) check(b->synchronize(&error), error);
  }

  void barrier() {
    std::vector<std::vector<char>> one(static_cast<size_t>(s_.ranksPerThread), std::vector<char>(1, 0));
    bookkeepingAllReduce(one, 1, ncclUint8, ncclSum);
  }

  // Every rank's "#  Rank ..." line, in rank order. Gathered with an all-reduce (a sum of byte strings, each zero
  // outside its owner's slot), so the driver's bookkeeping needs no collective but all-reduce.
  std::vector<std::string> gatherDeviceLines() {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
    std::vector<std::vector<char>> slots(static_cast<size_t>(s_.ranksPerThread),
                                         std::vector<char>(kDeviceLineBytes * static_cast<size_t>(s_.nranks), 0));
    for (int i = 0; i < s_.ranksPerThread; ++i) {
      const int rank = firstRank_ + i;
      const int device = ranks_[static_cast<size_t>(i)]->device();
      std::string where = device < 0 ? "[host] CPU" : CudaRuntime::get().describe(device);
      if (device < 0 && boundCpu_ >= 0) where += " " + std::to_string(boundCpu_);
      const std::string mine = deviceLine(rank, static_cast<int>(getpid()), host, device, where);
      std::memcpy(&slots[i][kDeviceLineBytes * rank], mine.data(), std::min(mine.size(), kDeviceLineBytes - 1));
    }
    bookkeepingAllReduce(slots, slots[0].size(), ncclUint8, ncclSum);
    std::vector<std::string> lines;
    for (int r = 0; r < s_.nranks; ++r) {
      const char* slot = &slots[0][kDeviceLineBytes * r];
      lines.emplace_back(slot, strnlen(slot, kDeviceLineBytes));
    }
    return lines;
  }

  // The time per operation reported for all ranks (-a: 0 rank 0's, 1 mean, 2 min, 3 max).
  double reduceTime(double seconds) {
    ncclRedOp_t op = ncclSum;
    if (s_.opts.average == 2) op = ncclMin;
    if (s_.opts.average == 3) op = ncclMax;
    std::vector<std::vector<double>> mine(static_cast<size_t>(s_.ranksPerThread));
    for (int i = 0; i < s_.ranksPerThread; ++i) {
      mine[static_cast<size_t>(i)] = {s_.opts.average == 0 && firstRank_ + i != 0 ? 0.0 : seconds};
    }
    double result = reduceOverRanks(mine, ncclFloat64, op)[0];
    if (s_.opts.average == 1) result /= s_.nranks;
    return result;
  }

  // Each iteration's time on the slowest rank, in microseconds (every rank takes part; all get the result).
  std::vector<double> slowestPerIteration(const std::vector<double>& seconds) {
    std::vector<double> us = reduceOverRanks(
        std::vector<std::vector<double>>(static_cast<size_t>(s_.ranksPerThread), seconds), ncclFloat64, ncclMax);
    for (double& t : us) t *= 1e6;
    return us;
  }

  int64_t sumOverRanks(const std::vector<int64_t>& perRank) {
    std::vector<std::vector<int64_t>> mine;
    for (int64_t v : perRank) mine.push_back({v});
    return reduceOverRanks(mine, ncclInt64, ncclSum)[0];
  }

  // The bookkeeping all-reduce over typed values: perRank[i] is this thread's rank i's vector (all of one length);
  // returns the reduced vector.
  template <typename T>
  std::vector<T> reduceOverRanks(const std::vector<std::vector<T>>& perRank, ncclDataType_t type, ncclRedOp_t op) {
    const size_t n = perRank[0].size();
    std::vector<std::vector<char>> bytes(perRank.size(), std::vector<char>(n * sizeof(T)));
    for (size_t i = 0; i < perRank.size(); ++i) std::memcpy(bytes[i].data(), perRank[i].data(), n * sizeof(T));
    bookkeepingAllReduce(bytes, n, type, op);
    std::vector<T> result(n);
    std::memcpy(result.data(), bytes[0].data(), n * sizeof(T));
    return result;
  }

  // nccl-tests' warm-up: -w out-of-place operations at the largest size, then -w at the smallest, before each sweep.
  // The large ones also keep every rank busy at once, so the kernel spreads them over the CPUs before anything is
  // timed.
  void warmUp(const TypeInfo& type, const OpInfo& op, int root) {
    if (s_.opts.warmupIters <= 0 || s_.sizes.empty()) return;
    std::string error;
    for (size_t bytes : {*std::max_element(s_.sizes.begin(), s_.sizes.end()), s_.sizes.front()}) {
      const CollCounts counts = s_.spec->counts(bytes, type.size, s_.nranks);
      std::vector<RunArgs> args;
      for (const auto& b : ranks_) args.push_back(argsFor(*b, type, op, root, counts, false, false));
      for (int w = 0; w < s_.opts.warmupIters; ++w) check(comms_->run(s_.spec->kind, args, &error), error);
      synchronize();
    }
  }

  RowResult measureRow(const TypeInfo& type, const OpInfo& op, int root, size_t bytes, uint64_t seed) {
    const CollCounts counts = s_.spec->counts(bytes, type.size, s_.nranks);
    RowResult row;
    row.bytes = std::max(counts.sendCount, counts.recvCount) * type.size;
    row.count = counts.paramCount;
    row.type = type.name;
    row.op = s_.spec->hasOp ? op.name : "none";
    row.root = s_.spec->hasRoot ? root : -1;
    row.outOfPlace = measure(type, op, root, counts, combineSeed(seed, 1), false);
    row.inPlace = measure(type, op, root, counts, combineSeed(seed, 2), true);
    if (s_.opts.reportTimestamps != 0) row.timestamp = timestampNow();
    return row;
  }

  // nccl-tests' buffer placement: out of place, separate buffers; in place, one buffer holding both, the smaller
  // side at rank * offset elements into the larger one.
  // `images`: the pointers into the host images rather than the library's buffers (the same on host memory).
  RunArgs argsFor(const RankBuffers& b, const TypeInfo& type, const OpInfo& op, int root, const CollCounts& counts,
                  bool inPlace, bool images) {
    const size_t ts = type.size;
    const size_t rank = static_cast<size_t>(b.rank());
    char* send = (images ? b.hostSend() : b.send()) + s_.opts.unalign * ts;
    char* recv = (images ? b.hostRecv() : b.recv()) + s_.opts.unalign * ts;
    RunArgs a;
    if (inPlace) {
      send = recv;
      if (counts.sendInPlaceOffset != 0) send = recv + counts.sendInPlaceOffset * rank * ts;
      if (counts.recvInPlaceOffset != 0) recv = send + counts.recvInPlaceOffset * rank * ts;
    }
    a.send = send;
    a.recv = recv;
    a.inPlace = inPlace;
    a.counts = counts;
    a.type = &type;
    a.op = &op;
    a.root = root;
    a.rank = b.rank();
    a.nranks = s_.nranks;
    a.stream = b.stream();
    return a;
  }

  PlacementResult measure(const TypeInfo& type, const OpInfo& op, int root, const CollCounts& counts, uint64_t seed,
                          bool inPlace) {
    const PerfOptions& o = s_.opts;
    const CollectiveSpec& spec = *s_.spec;
    const size_t ts = type.size;
    std::vector<RunArgs> args;
    std::vector<RunArgs> images;
    std::vector<DataCtx> ctxs;
    for (const auto& b : ranks_) {
      args.push_back(argsFor(*b, type, op, root, counts, inPlace, false));
      images.push_back(argsFor(*b, type, op, root, counts, inPlace, true));
      DataCtx ctx;
      ctx.type = &type;
      ctx.op = op.op;
      ctx.root = root;
      ctx.rank = b->rank();
      ctx.nranks = s_.nranks;
      ctx.counts = counts;
      ctxs.push_back(ctx);
    }
    // The bytes of each buffer an operation of this size touches (the in-place send lies inside the receive one).
    const size_t lead = static_cast<size_t>(o.unalign) * ts;
    const size_t sendUsed = lead + counts.sendCount * ts;
    const size_t recvUsed = lead + std::max(counts.sendCount, counts.recvCount) * ts;
    std::string error;
    auto prepare = [&](uint64_t dataSeed) {
      for (size_t i = 0; i < ranks_.size(); ++i) {
        ctxs[i].seed = dataSeed;
        poison(images[i].recv, counts.recvCount * ts);
        spec.initInput(ctxs[i], const_cast<void*>(images[i].send));
        check(ranks_[i]->upload(sendUsed, recvUsed, inPlace, &error), error);
      }
    };
    // nccl-tests moves each operation to the next unused stretch of the buffers (by its own size) so that
    // consecutive operations do not find their data in the caches; the arguments for every offset are made
    // before the timed loop. Checks run at offset 0, where the inputs were written.
    const size_t opBytes = std::max(sendUsed, recvUsed) - lead;
    const size_t steps = opBytes == 0 ? 1 : std::max<size_t>(1, (s_.bufferBytes - lead) / opBytes);
    // At most kMaxRotations distinct offsets: beyond that the oldest stretches have left the caches anyway, and the
    // table stays small for long runs.
    const size_t variants =
        std::min({steps, static_cast<size_t>(o.iters) * static_cast<size_t>(o.aggIters), kMaxRotations});
    std::vector<std::vector<RunArgs>> rotated(std::max<size_t>(variants, 1), args);
    for (size_t k = 1; k < rotated.size(); ++k) {
      for (RunArgs& a : rotated[k]) {
        a.send = static_cast<const char*>(a.send) + k * opBytes;
        a.recv = static_cast<char*>(a.recv) + k * opBytes;
      }
    }
    auto runAt = [&](size_t opIndex) {
      check(comms_->run(spec.kind, rotated[opIndex % rotated.size()], &error), error);
    };
    auto runOnce = [&]() { runAt(0); };
    int iterIndex = 0;
    auto iteration = [&]() {
      if (o.aggIters > 1) check(comms_->groupStart(&error), error);
      for (int a = 0; a < o.aggIters; ++a) runAt(static_cast<size_t>(iterIndex) * o.aggIters + a);
      ++iterIndex;
      if (o.aggIters > 1) check(comms_->groupEnd(&error), error);
      if (o.blocking == 1 || o.blocking == 2) synchronize();
      if (o.blocking == 1) barrier();  // after the group: a barrier inside it would be fused with the ops
    };
    // Seconds from `start` to completion, or to the last issue with -C (the same on host buffers).
    auto finish = [&](Clock::time_point start) {
      const auto issued = Clock::now();
      synchronize();
      return std::chrono::duration<double>((o.reportCpuTime != 0 ? issued : Clock::now()) - start).count();
    };

    // As nccl-tests: one untimed operation and a barrier before the timed ones (-w warms up once per sweep).
    prepare(combineSeed(seed, 0));
    runOnce();
    synchronize();
    barrier();
    double elapsed = 0;
    std::vector<double> iterSeconds;  // -I
    if (o.blocking == 3 || o.perIterTiming != 0) {
      // Each iteration timed on its own; -z 3's barrier after each one stays outside the timed span.
      for (int it = 0; it < o.iters; ++it) {
        const auto start = Clock::now();
        iteration();
        const double t = finish(start);
        elapsed += t;
        if (o.perIterTiming != 0) iterSeconds.push_back(t / o.aggIters);  // per operation, as the time column
        if (o.blocking == 3) barrier();
      }
    } else {
      const auto start = Clock::now();
      for (int it = 0; it < o.iters; ++it) iteration();
      elapsed = finish(start);
    }
    const double perOp = elapsed / (static_cast<double>(o.iters) * static_cast<double>(o.aggIters));

    PlacementResult result;
    const double seconds = reduceTime(perOp);
    result.timeUs = seconds * 1e6;
    result.algBw = static_cast<double>(spec.algBytes(counts, ts, s_.nranks)) / 1e9 / seconds;
    result.busBw = result.algBw * spec.busBwFactor(s_.nranks);
    if (o.perIterTiming != 0) {
      result.iter = computeIterStats(slowestPerIteration(iterSeconds), o.perIterSkip);
      result.hasIterStats = true;
    }

    if (o.check > 0 && (spec.checkInPlace || !inPlace)) {
      // As in nccl-tests: the first check iteration with wrong values ends the checking, #wrong shows its count,
      // and each thread whose ranks saw wrong values adds one to the footer's "Out of bounds values".
      for (int c = 0; c < o.check && result.wrong == 0; ++c) {
        prepare(combineSeed(seed, 100 + static_cast<uint64_t>(c)));
        runOnce();
        synchronize();
        std::vector<int64_t> wrong(ranks_.size(), 0);
        int64_t threadWrong = 0;
        for (size_t i = 0; i < ranks_.size(); ++i) {
          RankBuffers& b = *ranks_[i];
          check(b.download(recvUsed, &error), error);
          const size_t n = spec.initExpected(ctxs[i], b.expected());
          if (injectWrong_ == b.rank() && n > 0) corruptFirst(images[i].recv, b.expected(), ts);
          wrong[i] = static_cast<int64_t>(countMismatches(type, images[i].recv, b.expected(), n));
          threadWrong += wrong[i];
        }
        result.wrong = sumOverRanks(wrong);
        std::vector<int64_t> failed(ranks_.size(), 0);
        failed[0] = threadWrong != 0 ? 1 : 0;
        result.failedChecks = sumOverRanks(failed);
      }
      result.checked = true;
    }
    return result;
  }

  void finishReport(const std::vector<RowResult>& rows, int64_t failedChecks, double avgBusBw) {
    const char* bwCheck = "";  // nccl-tests marks the average OK or FAILED only when NCCL_TESTS_MIN_BW is set
    if (const char* minBw = std::getenv("NCCL_TESTS_MIN_BW"); minBw != nullptr && *minBw != '\0') {
      const double expected = std::atof(minBw);
      bwCheck = avgBusBw < 0.9 * expected ? "FAILED" : "OK";
      if (avgBusBw < 0.9 * expected) {
        std::fprintf(stderr, "%s: average bus bandwidth %g GB/s is below 0.9 x NCCL_TESTS_MIN_BW (%g)\n", s_.spec->name,
                     avgBusBw, expected);
        s_.raiseStatus(kStatusWrong);
      }
    }
    printFooter(stdout, s_.spec->name, failedChecks, avgBusBw, bwCheck);
    if (!s_.opts.jsonFile.empty()) {
      std::string error;
      if (!writeJson(s_.opts.jsonFile, s_.info, rows, failedChecks, avgBusBw, &error)) {
        std::fprintf(stderr, "%s: %s\n", s_.spec->name, error.c_str());
        s_.raiseStatus(kStatusError);
      }
    }
  }

  // Test hook (BRAID_PERF_INJECT_WRONG=<rank>): that rank's first result element is made wrong before each check,
  // so tests can see the #wrong count, the FAILED footer and the exit status work.
  static int injectWrongRank() {
    const char* v = std::getenv("BRAID_PERF_INJECT_WRONG");
    return v != nullptr && *v != '\0' ? std::atoi(v) : -1;
  }
  static void corruptFirst(void* result, const void* expected, size_t typeSize) {
    auto* r = static_cast<unsigned char*>(result);
    std::memcpy(r, expected, typeSize);
    r[0] ^= 0x01;
  }

  Shared& s_;
  const int thread_;
  const int firstRank_;
  int boundCpu_ = -1;
  const int injectWrong_ = injectWrongRank();
  std::unique_ptr<ThreadComms> comms_;
  std::vector<std::unique_ptr<RankBuffers>> ranks_;
  bool onDevice_ = false;
};

// Per-rank buffer sizes: the largest any swept size needs for any selected type, plus the misalignment.
void sizeBuffers(Shared& s) {
  for (const TypeInfo* type : s.opts.types) {
    for (size_t bytes : s.sizes) {
      const CollCounts c = s.spec->counts(bytes, type->size, s.nranks);
      const size_t extra = static_cast<size_t>(s.opts.unalign) * type->size;
      s.bufferBytes = std::max(s.bufferBytes, std::max(c.sendCount, c.recvCount) * type->size + extra);
    }
  }
}

// Waits for the driver threads, honouring -T.
void waitForThreads(Shared& s) {
  std::unique_lock<std::mutex> lock(s.mu);
  auto allDone = [&]() { return s.finishedThreads == s.opts.nThreads; };
  if (s.opts.timeoutSec > 0) {
    if (!s.done.wait_for(lock, std::chrono::seconds(s.opts.timeoutSec), allDone)) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s: Test timeout: not finished after %d s (-T); exiting\n", s.spec->name,
                   s.opts.timeoutSec);
      std::fflush(stderr);
      std::_Exit(kStatusTimeout);
    }
  } else {
    s.done.wait(lock, allDone);
  }
}

}  // namespace

int runPerf(const CollectiveSpec& spec, int argc, char** argv) {
  Shared s;
  s.spec = &spec;
  int exitStatus = 0;
  if (!parseOptions(argc, argv, spec.name, spec.hasOp, spec.hasRoot, &s.opts, &exitStatus)) return exitStatus;

  for (const char* split : {"NCCL_TESTS_SPLIT", "NCCL_TESTS_SPLIT_MASK"}) {
    if (const char* v = std::getenv(split); v != nullptr && *v != '\0') {
      std::fprintf(stderr,
                   "%s: %s=%s: running one test per group of ranks is not implemented in braid's perf tools; unset "
                   "it\n",
                   spec.name, split, v);
      return kStatusError;
    }
  }
  std::string error;
  s.backend = makeBackend(s.opts.baseline, &error);
  if (!s.backend) {
    std::fprintf(stderr, "%s: %s\n", spec.name, error.c_str());
    return kStatusError;
  }
  const Backend& backend = *s.backend;
  if (s.opts.buffers == BufferPlace::kDevice) {
    if (!backend.takesDeviceBuffers()) {
      std::fprintf(stderr, "%s: --buffers device: --baseline %s measures host memory only\n", spec.name,
                   backend.name());
      return kStatusError;
    }
    if (const CudaRuntime& cuda = CudaRuntime::get(); cuda.deviceCount() == 0) {
      std::fprintf(stderr, "%s: --buffers device: no CUDA device (%s); use --buffers host or auto\n", spec.name,
                   cuda.why().c_str());
      return kStatusError;
    }
  }
  if (backend.maxRanksPerThread() != 0 && s.opts.nGpus > backend.maxRanksPerThread()) {
    std::fprintf(stderr, "%s: --baseline %s drives one rank per thread; use -g 1\n", spec.name, backend.name());
    return kStatusError;
  }
  if (backend.maxThreadsPerProcess() != 0 && s.opts.nThreads > backend.maxThreadsPerProcess()) {
    std::fprintf(stderr, "%s: --baseline %s runs one rank per process; use -t 1 and more processes\n", spec.name,
                 backend.name());
    return kStatusError;
  }
  if (!detectLaunch(&s.launch, &error)) {
    std::fprintf(stderr, "%s: %s\n", spec.name, error.c_str());
    return kStatusError;
  }
  s.ranksPerThread = s.opts.nGpus;
  const long long perProcess = static_cast<long long>(s.opts.nThreads) * s.opts.nGpus;
  if (perProcess > INT_MAX || !s.backend->startProcess(&s.launch, static_cast<int>(perProcess), &error)) {
    std::fprintf(stderr, "%s: %s\n", spec.name, error.empty() ? "too many ranks per process" : error.c_str());
    return kStatusError;
  }
  const long long nranks = static_cast<long long>(s.launch.worldSize) * perProcess;
  if (nranks > INT_MAX) {
    std::fprintf(stderr, "%s: %d processes x %lld ranks is too many ranks\n", spec.name, s.launch.worldSize,
                 perProcess);
    return kStatusError;
  }
  s.nranks = static_cast<int>(nranks);
  if (spec.hasRoot && s.opts.root >= s.nranks) {
    std::fprintf(stderr, "%s: root %d (-r) is not a rank below %d\n", spec.name, s.opts.root, s.nranks);
    return kStatusError;
  }
  s.sizes = sweepSizes(s.opts);
  s.libraryIsBraid = dlsym(RTLD_DEFAULT, "braidAlltoAllv") != nullptr;
  if (cpu_set_t allowed; sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) s.cpus.push_back(c);
    }
  }
  sizeBuffers(s);

  int libraryVersion = 0;
  if (ncclResult_t r = ncclGetVersion(&libraryVersion); r != ncclSuccess) fail(s, -1, "ncclGetVersion failed");
  s.info.tool = spec.name;
  s.info.library = backend.name();
  s.info.headerVersion = NCCL_VERSION_CODE;
  s.info.libraryVersion = libraryVersion;
  s.info.nranks = s.nranks;
  s.info.nprocs = s.launch.worldSize;
  if (backend.takesDeviceBuffers()) {  // the NCCL API's own selection knobs; the baselines have none
    for (auto [name, field] : {std::pair{"NCCL_ALGO", &s.info.algo}, std::pair{"NCCL_PROTO", &s.info.proto}}) {
      if (const char* v = std::getenv(name); v != nullptr) *field = v;
    }
  }
  s.info.opts = &s.opts;
  if (s.launch.procRank == 0) printHeader(stdout, s.info);

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(s.opts.nThreads));
  for (int t = 0; t < s.opts.nThreads; ++t) {
    threads.emplace_back([&s, t]() {
      ThreadRunner(s, t).run();
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.finishedThreads;
      s.done.notify_all();
    });
  }
  waitForThreads(s);
  for (std::thread& t : threads) t.join();
  s.backend->finishProcess();
  std::fflush(stdout);
  return s.status.load();
}

}  // namespace braid::perf
