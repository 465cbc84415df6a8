// The shared driver of the perf tools: ranks as threads (and processes), buffers, timing, checking, output.
// The library measured is a Backend (braid, or an MPI/Gloo baseline); nothing here calls a library directly.
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
#include "perf/common/data_types.h"
#include "perf/common/launch.h"
#include "perf/common/options.h"
#include "perf/common/report.h"

namespace braid::perf {
namespace {

constexpr size_t kDeviceLineBytes = 192;  // one rank's slot when the "# Using devices" lines are gathered
constexpr size_t kBufferAlignment = 4096;
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
  size_t sendBufferBytes = 0;  // per rank, unalignment included
  size_t recvBufferBytes = 0;  // per rank: large enough for either shape, since in place shares it
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

// Buffers come from the backend (ncclMemAlloc for braid) and go back to it.
struct BackendFree {
  Backend* backend = nullptr;
  void operator()(char* p) const { backend->release(p); }
};
using Buffer = std::unique_ptr<char, BackendFree>;

Buffer allocateBuffer(Backend* backend, size_t bytes) {
  const size_t rounded =
      std::max<size_t>(kBufferAlignment, (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment);
  return Buffer(static_cast<char*>(backend->allocate(rounded)), BackendFree{backend});
}

// One rank's buffers.
struct RankBuffers {
  int rank = 0;
  Buffer send;
  Buffer recv;
  Buffer expected;
};

// One driver thread: the -g ranks it drives, through one backend.
class ThreadRunner {
 public:
  ThreadRunner(Shared& shared, int thread)
      : s_(shared), firstRank_((shared.launch.procRank * shared.opts.nThreads + thread) * shared.ranksPerThread) {}

  void run() {
    std::string error;
    comms_ = s_.backend->connect(firstRank_, s_.ranksPerThread, s_.nranks, &error);
    if (!comms_) fail(s_, firstRank_, error);
    refuseUnsupported();
    const std::vector<std::string> lines = gatherDeviceLines();
    if (isReporter()) printDevicesAndTableHeader(stdout, lines);

    for (int i = 0; i < s_.ranksPerThread; ++i) {
      RankBuffers b;
      b.rank = firstRank_ + i;
      b.send = allocateBuffer(s_.backend.get(), s_.sendBufferBytes);
      b.recv = allocateBuffer(s_.backend.get(), s_.recvBufferBytes);
      b.expected = allocateBuffer(s_.backend.get(), s_.recvBufferBytes);
      if (!b.send || !b.recv || !b.expected) {
        fail(s_, b.rank,
             "cannot allocate " + std::to_string(s_.sendBufferBytes) + " + 2 x " + std::to_string(s_.recvBufferBytes) +
                 " bytes of buffers (lower -e)");
      }
      ranks_.push_back(std::move(b));
    }

    const PerfOptions& o = s_.opts;
    std::vector<RowResult> rows;
    int64_t wrongTotal = 0;
    for (int cycle = 0; o.runCycles == 0 || cycle < o.runCycles; ++cycle) {
      for (size_t ti = 0; ti < o.types.size(); ++ti) {
        for (size_t oi = 0; oi < o.ops.size(); ++oi) {
          for (size_t si = 0; si < s_.sizes.size(); ++si) {
            const uint64_t seed = combineSeed(combineSeed(combineSeed(cycle, ti), oi), si);
            RowResult row = measureRow(*o.types[ti], *o.ops[oi], s_.sizes[si], seed);
            wrongTotal += row.outOfPlace.wrong + row.inPlace.wrong;
            if (isReporter()) printRow(stdout, row);
            rows.push_back(row);
          }
        }
      }
    }
    const double avgBusBw = averageBusBw(rows);
    if (wrongTotal != 0) s_.raiseStatus(kStatusWrong);
    if (isReporter()) finishReport(rows, wrongTotal, avgBusBw);

    if (!comms_->close(&error)) fail(s_, firstRank_, error);
    comms_.reset();
  }

 private:
  bool isReporter() const { return firstRank_ == 0; }

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
    check(comms_->allReduce(bufs, count, type, op, &error), error);
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
      const std::string mine = deviceLine(rank, static_cast<int>(getpid()), host, comms_->device(i));
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
    std::vector<std::vector<char>> v(static_cast<size_t>(s_.ranksPerThread), std::vector<char>(sizeof(double)));
    for (int i = 0; i < s_.ranksPerThread; ++i) {
      const double mine = s_.opts.average == 0 && firstRank_ + i != 0 ? 0.0 : seconds;
      std::memcpy(v[i].data(), &mine, sizeof(mine));
    }
    bookkeepingAllReduce(v, 1, ncclFloat64, op);
    double result = 0;
    std::memcpy(&result, v[0].data(), sizeof(result));
    if (s_.opts.average == 1) result /= s_.nranks;
    return result;
  }

  int64_t sumOverRanks(const std::vector<int64_t>& perRank) {
    std::vector<std::vector<char>> v(perRank.size(), std::vector<char>(sizeof(int64_t)));
    for (size_t i = 0; i < perRank.size(); ++i) std::memcpy(v[i].data(), &perRank[i], sizeof(int64_t));
    bookkeepingAllReduce(v, 1, ncclInt64, ncclSum);
    int64_t total = 0;
    std::memcpy(&total, v[0].data(), sizeof(total));
    return total;
  }

  RowResult measureRow(const TypeInfo& type, const OpInfo& op, size_t bytes, uint64_t seed) {
    const CollCounts counts = s_.spec->counts(bytes, type.size, s_.nranks);
    RowResult row;
    row.bytes = std::max(counts.sendCount, counts.recvCount) * type.size;
    row.count = counts.paramCount;
    row.type = type.name;
    row.op = s_.spec->hasOp ? op.name : "none";
    row.root = s_.spec->hasRoot ? s_.opts.root : -1;
    row.outOfPlace = measure(type, op, counts, combineSeed(seed, 1), false);
    row.inPlace = measure(type, op, counts, combineSeed(seed, 2), true);
    return row;
  }

  // nccl-tests' buffer placement: out of place, separate buffers; in place, one buffer holding both, the smaller
  // side at rank * offset elements into the larger one.
  RunArgs argsFor(RankBuffers& b, const TypeInfo& type, const OpInfo& op, const CollCounts& counts, bool inPlace) {
    const size_t ts = type.size;
    const size_t rank = static_cast<size_t>(b.rank);
    char* send = b.send.get() + s_.opts.unalign * ts;
    char* recv = b.recv.get() + s_.opts.unalign * ts;
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
    a.root = s_.opts.root;
    a.rank = b.rank;
    a.nranks = s_.nranks;
    return a;
  }

  PlacementResult measure(const TypeInfo& type, const OpInfo& op, const CollCounts& counts, uint64_t seed,
                          bool inPlace) {
    const PerfOptions& o = s_.opts;
    const CollectiveSpec& spec = *s_.spec;
    const size_t ts = type.size;
    std::vector<RunArgs> args;
    std::vector<DataCtx> ctxs;
    for (RankBuffers& b : ranks_) {
      args.push_back(argsFor(b, type, op, counts, inPlace));
      DataCtx ctx;
      ctx.type = &type;
      ctx.op = op.op;
      ctx.root = o.root;
      ctx.rank = b.rank;
      ctx.nranks = s_.nranks;
      ctx.counts = counts;
      ctxs.push_back(ctx);
    }
    auto prepare = [&](uint64_t dataSeed) {
      for (size_t i = 0; i < ranks_.size(); ++i) {
        ctxs[i].seed = dataSeed;
        poison(args[i].recv, counts.recvCount * ts);
        spec.initInput(ctxs[i], const_cast<void*>(args[i].send));
      }
    };
    std::string error;
    auto runOnce = [&]() { check(comms_->run(spec.kind, args, &error), error); };
    auto iteration = [&]() {
      if (o.aggIters > 1) check(comms_->groupStart(&error), error);
      for (int a = 0; a < o.aggIters; ++a) runOnce();
      if (o.aggIters > 1) check(comms_->groupEnd(&error), error);
      if (o.blocking == 1) barrier();  // after the group: a barrier inside it would be fused with the ops
    };

    prepare(combineSeed(seed, 0));
    for (int w = 0; w < o.warmupIters; ++w) iteration();
    double elapsed = 0;
    if (o.blocking == 3) {
      // Barrier after each iteration, outside the timed span.
      for (int it = 0; it < o.iters; ++it) {
        const auto start = Clock::now();
        iteration();
        elapsed += std::chrono::duration<double>(Clock::now() - start).count();
        barrier();
      }
    } else {
      const auto start = Clock::now();
      for (int it = 0; it < o.iters; ++it) iteration();
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    const double perOp = elapsed / (static_cast<double>(o.iters) * static_cast<double>(o.aggIters));

    PlacementResult result;
    const double seconds = reduceTime(perOp);
    result.timeUs = seconds * 1e6;
    result.algBw = static_cast<double>(spec.algBytes(counts, ts, s_.nranks)) / 1e9 / seconds;
    result.busBw = result.algBw * spec.busBwFactor(s_.nranks);

    if (o.check > 0 && (spec.checkInPlace || !inPlace)) {
      std::vector<int64_t> wrong(ranks_.size(), 0);
      for (int c = 0; c < o.check; ++c) {
        prepare(combineSeed(seed, 100 + static_cast<uint64_t>(c)));
        runOnce();
        for (size_t i = 0; i < ranks_.size(); ++i) {
          const size_t n = spec.initExpected(ctxs[i], ranks_[i].expected.get());
          if (injectWrong_ == ranks_[i].rank && n > 0) corruptFirst(args[i].recv, ranks_[i].expected.get(), ts);
          wrong[i] += static_cast<int64_t>(countMismatches(type, args[i].recv, ranks_[i].expected.get(), n));
        }
      }
      result.wrong = sumOverRanks(wrong);
      result.checked = true;
    }
    return result;
  }

  void finishReport(const std::vector<RowResult>& rows, int64_t wrongTotal, double avgBusBw) {
    printFooter(stdout, s_.spec->name, wrongTotal, avgBusBw);
    if (const char* minBw = std::getenv("NCCL_TESTS_MIN_BW"); minBw != nullptr && *minBw != '\0') {
      const double expected = std::atof(minBw);
      if (avgBusBw < 0.9 * expected) {
        std::fprintf(stderr, "%s: average bus bandwidth %g GB/s is below 0.9 x NCCL_TESTS_MIN_BW (%g)\n", s_.spec->name,
                     avgBusBw, expected);
        s_.raiseStatus(kStatusWrong);
      }
    }
    if (!s_.opts.jsonFile.empty()) {
      std::string error;
      if (!writeJson(s_.opts.jsonFile, s_.info, rows, wrongTotal, avgBusBw, &error)) {
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
  const int firstRank_;
  const int injectWrong_ = injectWrongRank();
  std::unique_ptr<ThreadComms> comms_;
  std::vector<RankBuffers> ranks_;
};

// Per-rank buffer sizes: the largest any swept size needs for any selected type, plus the misalignment.
void sizeBuffers(Shared& s) {
  for (const TypeInfo* type : s.opts.types) {
    for (size_t bytes : s.sizes) {
      const CollCounts c = s.spec->counts(bytes, type->size, s.nranks);
      const size_t extra = static_cast<size_t>(s.opts.unalign) * type->size;
      s.sendBufferBytes = std::max(s.sendBufferBytes, c.sendCount * type->size + extra);
      s.recvBufferBytes = std::max(s.recvBufferBytes, std::max(c.sendCount, c.recvCount) * type->size + extra);
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

  std::string error;
  s.backend = makeBackend(s.opts.baseline, &error);
  if (!s.backend) {
    std::fprintf(stderr, "%s: %s\n", spec.name, error.c_str());
    return kStatusError;
  }
  const Backend& backend = *s.backend;
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
  sizeBuffers(s);

  int libraryVersion = 0;
  if (ncclResult_t r = ncclGetVersion(&libraryVersion); r != ncclSuccess) fail(s, -1, "ncclGetVersion failed");
  s.info.tool = spec.name;
  s.info.library = backend.name();
  s.info.headerVersion = NCCL_VERSION_CODE;
  s.info.libraryVersion = libraryVersion;
  s.info.nranks = s.nranks;
  s.info.nprocs = s.launch.worldSize;
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
