// The shared driver of the perf tools: ranks as threads (and processes), buffers, timing, checking, output.
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

// State shared by the rank threads of this process.
struct Shared {
  const CollectiveSpec* spec = nullptr;
  PerfOptions opts;
  LaunchInfo launch;
  RunInfo info;
  ncclUniqueId id;
  int nranks = 1;
  std::vector<size_t> sizes;
  size_t sendBufferBytes = 0;  // per rank, unalignment included
  size_t recvBufferBytes = 0;
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

// A failed NCCL call ends the process (as nccl-tests does): the other ranks are blocked in collectives with this
// one and would only time out. braidrun, mpirun or srun then stop the other processes.
[[noreturn]] void failNccl(const Shared& s, int rank, const char* what, ncclResult_t result, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  std::fflush(stdout);
  std::fprintf(stderr, "%s: rank %d: %s failed: %s%s%s\n", s.spec->name, rank, what, ncclGetErrorString(result),
               last != nullptr && *last != '\0' ? ": " : "", last != nullptr ? last : "");
  std::fflush(stderr);
  std::_Exit(kStatusError);
}

inline uint64_t combineSeed(uint64_t a, uint64_t b) {
  return (a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2)));
}

struct AlignedFree {
  void operator()(char* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, AlignedFree>;

Buffer allocateBuffer(size_t bytes) {
  const size_t rounded =
      std::max<size_t>(kBufferAlignment, (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment);
  char* p = static_cast<char*>(std::aligned_alloc(kBufferAlignment, rounded));
  if (p != nullptr) std::memset(p, 0, rounded);  // touch every page before anything is timed
  return Buffer(p);
}

class RankRunner {
 public:
  RankRunner(Shared& shared, int thread) : s_(shared), rank_(shared.launch.procRank * shared.opts.nThreads + thread) {}

  void run() {
    check(ncclCommInitRank(&comm_, s_.nranks, s_.id, rank_), "ncclCommInitRank");
    int device = -1;
    check(ncclCommCuDevice(comm_, &device), "ncclCommCuDevice");
    const std::vector<std::string> lines = gatherDeviceLines(device);
    if (isReporter()) printDevicesAndTableHeader(stdout, lines);

    send_ = allocateBuffer(s_.sendBufferBytes);
    recv_ = allocateBuffer(s_.recvBufferBytes);
    expected_ = allocateBuffer(s_.recvBufferBytes);
    if (!send_ || !recv_ || !expected_) {
      std::fprintf(stderr, "%s: rank %d: cannot allocate %zu + 2 x %zu bytes of buffers\n", s_.spec->name, rank_,
                   s_.sendBufferBytes, s_.recvBufferBytes);
      std::fflush(stderr);
      std::_Exit(kStatusError);
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

    check(ncclCommDestroy(comm_), "ncclCommDestroy");
    comm_ = nullptr;
  }

 private:
  bool isReporter() const { return rank_ == 0; }

  void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) failNccl(s_, rank_, what, r, comm_);
  }

  // Every rank's "#  Rank ..." line, in rank order. Gathered with an all-reduce (a sum of byte strings, each zero
  // outside its owner's slot), so the driver's bookkeeping needs no collective but all-reduce.
  std::vector<std::string> gatherDeviceLines(int device) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
    const std::string mine = deviceLine(rank_, static_cast<int>(getpid()), host, device);
    std::vector<char> slots(kDeviceLineBytes * static_cast<size_t>(s_.nranks), 0);
    std::memcpy(&slots[kDeviceLineBytes * rank_], mine.data(), std::min(mine.size(), kDeviceLineBytes - 1));
    check(ncclAllReduce(slots.data(), slots.data(), slots.size(), ncclUint8, ncclSum, comm_, nullptr),
          "ncclAllReduce (device lines)");
    std::vector<std::string> lines;
    for (int r = 0; r < s_.nranks; ++r) {
      const char* slot = &slots[kDeviceLineBytes * r];
      lines.emplace_back(slot, strnlen(slot, kDeviceLineBytes));
    }
    return lines;
  }

  // The time per operation reported for all ranks (-a: 0 rank 0's, 1 mean, 2 min, 3 max).
  double reduceTime(double seconds) {
    double v = seconds;
    ncclRedOp_t op = ncclSum;
    if (s_.opts.average == 0 && rank_ != 0) v = 0;
    if (s_.opts.average == 2) op = ncclMin;
    if (s_.opts.average == 3) op = ncclMax;
    check(ncclAllReduce(&v, &v, 1, ncclFloat64, op, comm_, nullptr), "ncclAllReduce (time)");
    if (s_.opts.average == 1) v /= s_.nranks;
    return v;
  }

  int64_t sumOverRanks(int64_t value) {
    int64_t v = value;
    check(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, comm_, nullptr), "ncclAllReduce (#wrong)");
    return v;
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

  PlacementResult measure(const TypeInfo& type, const OpInfo& op, const CollCounts& counts, uint64_t seed,
                          bool inPlace) {
    const PerfOptions& o = s_.opts;
    const CollectiveSpec& spec = *s_.spec;
    const size_t ts = type.size;
    char* send = send_.get() + o.unalign * ts;
    char* recv = recv_.get() + o.unalign * ts;
    char* sendPtr = inPlace ? recv + counts.sendInPlaceOffset * ts : send;

    DataCtx ctx;
    ctx.type = &type;
    ctx.op = op.op;
    ctx.root = o.root;
    ctx.rank = rank_;
    ctx.nranks = s_.nranks;
    ctx.counts = counts;
    auto prepare = [&](uint64_t dataSeed) {
      ctx.seed = dataSeed;
      poison(recv, counts.recvCount * ts);
      spec.initInput(ctx, sendPtr);
    };

    RunArgs args;
    args.send = sendPtr;
    args.recv = recv;
    args.counts = counts;
    args.type = type.type;
    args.op = op.op;
    args.root = o.root;
    args.comm = comm_;
    args.stream = nullptr;
    auto iteration = [&]() {
      if (o.aggIters > 1) check(ncclGroupStart(), "ncclGroupStart");
      for (int a = 0; a < o.aggIters; ++a) check(spec.run(args), spec.name);
      if (o.aggIters > 1) check(ncclGroupEnd(), "ncclGroupEnd");
    };

    prepare(combineSeed(seed, 0));
    for (int w = 0; w < o.warmupIters; ++w) iteration();
    const auto start = std::chrono::steady_clock::now();
    for (int it = 0; it < o.iters; ++it) iteration();
    const auto end = std::chrono::steady_clock::now();
    const double perOp = std::chrono::duration<double>(end - start).count() /
                         (static_cast<double>(o.iters) * static_cast<double>(o.aggIters));

    PlacementResult result;
    const double seconds = reduceTime(perOp);
    result.timeUs = seconds * 1e6;
    result.algBw = static_cast<double>(spec.algBytes(counts, ts, s_.nranks)) / 1e9 / seconds;
    result.busBw = result.algBw * spec.busBwFactor(s_.nranks);

    if (o.check > 0) {
      int64_t wrong = 0;
      for (int c = 0; c < o.check; ++c) {
        prepare(combineSeed(seed, 100 + static_cast<uint64_t>(c)));
        check(spec.run(args), spec.name);
        const size_t n = spec.initExpected(ctx, expected_.get());
        wrong += static_cast<int64_t>(countMismatches(type, recv, expected_.get(), n));
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

  Shared& s_;
  const int rank_;
  ncclComm_t comm_ = nullptr;
  Buffer send_;
  Buffer recv_;
  Buffer expected_;
};

// Per-rank buffer sizes: the largest any swept size needs for any selected type, plus the misalignment.
void sizeBuffers(Shared& s) {
  for (const TypeInfo* type : s.opts.types) {
    for (size_t bytes : s.sizes) {
      const CollCounts c = s.spec->counts(bytes, type->size, s.nranks);
      const size_t extra = static_cast<size_t>(s.opts.unalign) * type->size;
      s.sendBufferBytes = std::max(s.sendBufferBytes, c.sendCount * type->size + extra);
      s.recvBufferBytes = std::max(s.recvBufferBytes, c.recvCount * type->size + extra);
    }
  }
}

}  // namespace

int runPerf(const CollectiveSpec& spec, int argc, char** argv) {
  Shared s;
  s.spec = &spec;
  int exitStatus = 0;
  if (!parseOptions(argc, argv, spec.name, spec.hasOp, spec.hasRoot, &s.opts, &exitStatus)) return exitStatus;

  std::string error;
  if (!detectLaunch(&s.launch, &error)) {
    std::fprintf(stderr, "%s: %s\n", spec.name, error.c_str());
    return kStatusError;
  }
  prepareRendezvous(&s.launch);
  const long long nranks = static_cast<long long>(s.launch.worldSize) * s.opts.nThreads;
  if (nranks > INT_MAX) {
    std::fprintf(stderr, "%s: %d processes x %d threads is too many ranks\n", spec.name, s.launch.worldSize,
                 s.opts.nThreads);
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
  if (ncclResult_t r = ncclGetVersion(&libraryVersion); r != ncclSuccess) failNccl(s, -1, "ncclGetVersion", r, nullptr);
  s.info.tool = spec.name;
  s.info.headerVersion = NCCL_VERSION_CODE;
  s.info.libraryVersion = libraryVersion;
  s.info.nranks = s.nranks;
  s.info.nprocs = s.launch.worldSize;
  s.info.opts = &s.opts;
  if (s.launch.procRank == 0) printHeader(stdout, s.info);

  // One process: this id is handed to the threads. Several: NCCL_COMM_ID is set, every process derives the same id.
  if (ncclResult_t r = ncclGetUniqueId(&s.id); r != ncclSuccess) {
    failNccl(s, s.launch.procRank * s.opts.nThreads, "ncclGetUniqueId", r, nullptr);
  }

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(s.opts.nThreads));
  for (int t = 0; t < s.opts.nThreads; ++t) {
    threads.emplace_back([&s, t]() {
      RankRunner(s, t).run();
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.finishedThreads;
      s.done.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(s.mu);
    auto allDone = [&]() { return s.finishedThreads == s.opts.nThreads; };
    if (s.opts.timeoutSec > 0) {
      if (!s.done.wait_for(lock, std::chrono::seconds(s.opts.timeoutSec), allDone)) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s: Test timeout: not finished after %d s (-T); exiting\n", spec.name, s.opts.timeoutSec);
        std::fflush(stderr);
        std::_Exit(kStatusTimeout);
      }
    } else {
      s.done.wait(lock, allDone);
    }
  }
  for (std::thread& t : threads) t.join();
  std::fflush(stdout);
  return s.status.load();
}

}  // namespace braid::perf
