#include "perf/common/options.h"

#include <getopt.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace braid::perf {
namespace {

constexpr int kBuffersOption = 1000;  // long-only options take codes outside the char range
constexpr int kBindOption = 1001;
constexpr int kHostAllocOption = 1002;

void printUsage(FILE* out, const char* tool, bool hasOp, bool hasRoot) {
  std::fprintf(
      out,
      "Usage: %s [options]\n"
      "Runs %s over NCCL communicators, nccl-tests style, on host or device buffers (--buffers).\n"
      "Ranks: this process runs -t ranks as threads; under braidrun, torchrun, mpirun or srun (WORLD_SIZE/"
      "RANK,\n"
      "OMPI_COMM_WORLD_SIZE/RANK, PMI_SIZE/RANK or SLURM_STEP_NUM_TASKS/SLURM_PROCID set) every process runs\n"
      "-t ranks.\n"
      "Options (sizes accept K, M, G suffixes = 2^10, 2^20, 2^30):\n"
      "  -t,--nthreads <n>        ranks (threads) per process [1]\n"
      "  -g,--ngpus <n>           ranks (GPUs) per thread, driven in one NCCL group [1]\n"
      "  -b,--minbytes <size>     smallest message [32M]\n"
      "  -e,--maxbytes <size>     largest message [32M]\n"
      "  -i,--stepbytes <size>    additive size step [1M]\n"
      "  -f,--stepfactor <n>      multiplicative size step (overrides -i when > 1)\n"
      "  -n,--iters <n>           timed iterations per size [20]\n"
      "  -w,--warmup_iters <n>    untimed iterations at the largest, then the smallest size, before each\n"
      "                           sweep; each size also runs one untimed operation first [1]\n"
      "  -m,--agg_iters <n>       operations aggregated in one group per iteration [1]\n"
      "  -N,--run_cycles <n>      repeat the sweep n times, 0 = forever [1]\n"
      "  -p,--parallel_init <0/1> accepted for compatibility (ranks always initialize concurrently) [0]\n"
      "  -c,--check <n>           correctness-check iterations per size, 0 = off [1]\n"
      "%s%s"
      "  -d,--datatype <type>     int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
      "                           f8e4m3 f8e5m2, or all [float]\n"
      "  -z,--blocking <0-3>      1 barrier after each op, 2 sync only, 3 barrier per iteration\n"
      "                           (excluded from the time) [0]\n"
      "  -R,--local_register <0-2> 1: register the buffers (ncclCommRegister); 2: as symmetric windows\n"
      "                           (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC) [0]\n"
      "  -y,--stream_null <0/1>   device buffers: use the default stream instead of one per rank [0]\n"
      "  -T,--timeout <sec>       give up (exit status 3) when the test runs longer than this [off]\n"
      "  -G,--cudagraph <0>       only 0: CUDA graph capture is not implemented [0]\n"
      "  -C,--report_cputime <0/1> report the time to issue the operations, not to complete them\n"
      "                           (device buffers; on host memory the two coincide) [0]\n"
      "  -a,--average <0-3>       time reported across ranks: 0 rank 0, 1 mean, 2 min, 3 max [1]\n"
      "  -I,--per_iter_timing <0/1> time every iteration; add i_min, i_max, i_p99 and i_cv%% columns\n"
      "                           (each iteration's time is the slowest rank's) [0]\n"
      "  -K,--per_iter_skip <n>   leave the first n iterations out of those columns [0]\n"
      "  -S,--report_timestamps <0/1> add a timestamp column [0]\n"
      "  -u,--unalign <n>         misalign buffers by n elements [0]\n"
      "  -J,--output_file <file>  also write the results as JSON\n"
      "  --baseline <lib>         measure braid (default), or MPI's or Gloo's own collectives with the\n"
      "                           same sizes, table and check: braid, mpi (start with mpirun), gloo\n"
      "  --buffers <where>        auto: device memory where the communicators have a CUDA device, host\n"
      "                           memory otherwise; host; device (needs libcudart and a GPU) [auto]\n"
      "  --host_alloc <how>       host buffers from memalloc: ncclMemAlloc, as nccl-tests allocates every\n"
      "                           buffer (memory braid's peers map); malloc: plain page-aligned memory, as\n"
      "                           a CPU program's [memalloc]\n"
      "  --bind <none|cores>      cores: when the host's rank threads (processes per host x -t) fit its\n"
      "                           CPUs, bind each to its own CPU; none: leave them to the scheduler [none]\n"
      "  -h,--help                this text\n"
      "Exit status: 0 success, 1 wrong results (or bandwidth below NCCL_TESTS_MIN_BW), 2 usage or NCCL\n"
      "error, 3 timeout.\n",
      tool, tool,
      hasOp ? "  -o,--op <op>             sum prod max min avg mulsum (pre-multiplied sum), or all [sum]\n" : "",
      hasRoot ? "  -r,--root <rank>         root rank of the collective, -1 every rank in turn [0]\n" : "");
}

bool parseInt(const char* text, long minValue, long maxValue, int* out) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 0);
  if (errno != 0 || *end != '\0' || v < minValue || v > maxValue) return false;
  *out = static_cast<int>(v);
  return true;
}

template <typename Info>
bool parseList(const char* text, const Info* (*all)(size_t*), const Info* (*find)(const char*),
               std::vector<const Info*>* out) {
  out->clear();
  if (std::strcmp(text, "all") == 0) {
    size_t n = 0;
    const Info* items = all(&n);
    for (size_t i = 0; i < n; ++i) out->push_back(&items[i]);
    return true;
  }
  // A comma-separated list is accepted too ("float,half").
  std::string s(text);
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    const std::string name = s.substr(start, comma - start);
    const Info* item = find(name.c_str());
    if (item == nullptr) return false;
    out->push_back(item);
    start = comma + 1;
  }
  return !out->empty();
}

const struct option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"average", required_argument, nullptr, 'a'},
    {"unalign", required_argument, nullptr, 'u'},
    {"output_file", required_argument, nullptr, 'J'},
    {"local_register", required_argument, nullptr, 'R'},
    {"baseline", required_argument, nullptr, 'B'},
    {"buffers", required_argument, nullptr, kBuffersOption},
    {"bind", required_argument, nullptr, kBindOption},
    {"host_alloc", required_argument, nullptr, kHostAllocOption},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"memory", required_argument, nullptr, 'M'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};

}  // namespace

bool parseSize(const char* text, size_t* out) {
  if (text == nullptr || *text == '\0' || *text == '-') return false;
  // A number as nccl-tests reads it ("1048576", "1.5K", ".5M", "1e3"), then an optional K, M or G (powers of two);
  // fractions of a byte are dropped.
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || !std::isfinite(v) || v < 0) return false;
  double scale = 1;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      scale = 1024.0;
      break;
    case 'm':
    case 'M':
      scale = 1024.0 * 1024.0;
      break;
    case 'g':
    case 'G':
      scale = 1024.0 * 1024.0 * 1024.0;
      break;
    default:
      return false;
  }
  if (*end != '\0' && end[1] != '\0') return false;
  const double bytes = v * scale;
  if (bytes >= 18446744073709551616.0) return false;  // 2^64: does not fit a size_t
  *out = static_cast<size_t>(bytes);
  return true;
}

bool parseOptions(int argc, char** argv, const char* toolName, bool hasOp, bool hasRoot, PerfOptions* opts,
                  int* exitStatus) {
  *exitStatus = 2;
  auto bad = [&](const char* what, const char* value) {
    std::fprintf(stderr, "%s: invalid %s '%s' (see -h)\n", toolName, what, value ? value : "");
    return false;
  };
  opterr = 0;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:u:J:R:I:K:S:M:x:D:V:h", kLongOptions,
                          nullptr)) != -1) {
    const char* arg = optarg;
    switch (c) {
      case 't':
        if (!parseInt(arg, 1, 4096, &opts->nThreads)) return bad("thread count (-t)", arg);
        break;
      case 'g':
        if (!parseInt(arg, 1, 4096, &opts->nGpus)) return bad("GPU count (-g)", arg);
        break;
      case 'b':
        if (!parseSize(arg, &opts->minBytes)) return bad("size (-b)", arg);
        break;
      case 'e':
        if (!parseSize(arg, &opts->maxBytes)) return bad("size (-e)", arg);
        break;
      case 'i':
        if (!parseSize(arg, &opts->stepBytes)) return bad("size step (-i)", arg);
        break;
      case 'f': {
        int f = 0;
        if (!parseInt(arg, 1, INT_MAX, &f)) return bad("step factor (-f)", arg);
        opts->stepFactor = static_cast<size_t>(f);
        break;
      }
      case 'n':
        if (!parseInt(arg, 1, INT_MAX, &opts->iters)) return bad("iteration count (-n)", arg);
        break;
      case 'm':
        if (!parseInt(arg, 1, INT_MAX, &opts->aggIters)) return bad("aggregation count (-m)", arg);
        break;
      case 'w':
        if (!parseInt(arg, 0, INT_MAX, &opts->warmupIters)) return bad("warm-up count (-w)", arg);
        break;
      case 'N':
        if (!parseInt(arg, 0, INT_MAX, &opts->runCycles)) return bad("cycle count (-N)", arg);
        break;
      case 'p':
        if (!parseInt(arg, 0, 1, &opts->parallelInit)) return bad("parallel init flag (-p)", arg);
        break;
      case 'c':
        if (!parseInt(arg, 0, INT_MAX, &opts->check)) return bad("check count (-c)", arg);
        break;
      case 'o':
        if (!parseList<OpInfo>(arg, allOps, findOp, &opts->ops)) return bad("reduction op (-o)", arg);
        break;
      case 'd':
        if (!parseList<TypeInfo>(arg, allTypes, findType, &opts->types)) return bad("datatype (-d)", arg);
        break;
      case 'r':
        if (!parseInt(arg, -1, INT_MAX, &opts->root)) return bad("root (-r)", arg);
        break;
      case 'z':
        if (!parseInt(arg, 0, 3, &opts->blocking)) return bad("blocking mode (-z)", arg);
        break;
      case 'y':
        if (!parseInt(arg, 0, 1, &opts->streamNull)) return bad("stream_null flag (-y)", arg);
        break;
      case 'T':
        if (!parseInt(arg, 0, INT_MAX, &opts->timeoutSec)) return bad("timeout (-T)", arg);
        break;
      case 'G':
        if (!parseInt(arg, 0, INT_MAX, &opts->cudaGraph)) return bad("CUDA graph count (-G)", arg);
        break;
      case 'C':
        if (!parseInt(arg, 0, 1, &opts->reportCpuTime)) return bad("report_cputime flag (-C)", arg);
        break;
      case 'a':
        if (!parseInt(arg, 0, 3, &opts->average)) return bad("average mode (-a)", arg);
        break;
      case 'u':
        if (!parseInt(arg, 0, 1 << 20, &opts->unalign)) return bad("unalign count (-u)", arg);
        break;
      case 'J':
        if (arg == nullptr || *arg == '\0') return bad("output file (-J)", arg);
        opts->jsonFile = arg;
        break;
      case 'R':
        if (!parseInt(arg, 0, 2, &opts->localRegister)) return bad("registration mode (-R)", arg);
        break;
      case 'B':
        if (arg == nullptr || *arg == '\0') return bad("baseline (--baseline)", arg);
        opts->baseline = arg;
        break;
      case kBuffersOption: {
        const std::string v = arg == nullptr ? "" : arg;
        if (v == "auto") {
          opts->buffers = BufferPlace::kAuto;
        } else if (v == "host") {
          opts->buffers = BufferPlace::kHost;
        } else if (v == "device") {
          opts->buffers = BufferPlace::kDevice;
        } else {
          return bad("buffer place (--buffers auto|host|device)", arg);
        }
        break;
      }
      case kHostAllocOption: {
        const std::string v = arg == nullptr ? "" : arg;
        if (v != "memalloc" && v != "malloc") return bad("host buffer allocator (--host_alloc memalloc|malloc)", arg);
        opts->plainHost = v == "malloc";
        break;
      }
      case kBindOption: {
        const std::string v = arg == nullptr ? "" : arg;
        if (v != "cores" && v != "none") return bad("thread binding (--bind none|cores)", arg);
        opts->bindThreads = v == "cores";
        break;
      }
      case 'I':
        if (!parseInt(arg, 0, 1, &opts->perIterTiming)) return bad("per-iteration timing flag (-I)", arg);
        break;
      case 'K':
        if (!parseInt(arg, 0, INT_MAX, &opts->perIterSkip)) return bad("per-iteration skip (-K)", arg);
        break;
      case 'S':
        if (!parseInt(arg, 0, 1, &opts->reportTimestamps)) return bad("timestamp flag (-S)", arg);
        break;
      case 'M':
      case 'x':
      case 'D':
      case 'V': {
        // nccl-tests flags braid's tools do not implement yet: named, never silently ignored.
        const char* what = c == 'M'   ? "GPU memory report"
                           : c == 'x' ? "CTA policy (CUDA)"
                                      : "device-API kernels (CUDA)";
        std::fprintf(stderr, "%s: -%c (%s) is not implemented in braid's perf tools\n", toolName, c, what);
        return false;
      }
      case 'h':
        printUsage(stdout, toolName, hasOp, hasRoot);
        *exitStatus = 0;
        return false;
      default:
        if (optopt != 0) {
          std::fprintf(stderr, "%s: option -%c is unknown or needs a value (see -h)\n", toolName, optopt);
        } else {
          std::fprintf(stderr, "%s: option '%s' is unknown or needs a value (see -h)\n", toolName, argv[optind - 1]);
        }
        return false;
    }
  }
  if (optind < argc) return bad("argument", argv[optind]);

  // What the host build cannot do is refused, not silently ignored.
  if (opts->cudaGraph != 0) {
    std::fprintf(stderr, "%s: -G %d: CUDA graph capture is not implemented in braid's perf tools; use -G 0\n", toolName,
                 opts->cudaGraph);
    return false;
  }
  if (opts->perIterTiming != 0 && opts->perIterSkip >= opts->iters) {
    std::fprintf(stderr, "%s: -K %d skips every one of the %d iterations (-n); use -K below -n\n", toolName,
                 opts->perIterSkip, opts->iters);
    return false;
  }
  if (opts->minBytes > opts->maxBytes) {
    std::fprintf(stderr, "%s: minimum size %zu (-b) is larger than maximum size %zu (-e)\n", toolName, opts->minBytes,
                 opts->maxBytes);
    return false;
  }
  if (opts->types.empty()) opts->types.push_back(findType("float"));
  if (opts->ops.empty()) opts->ops.push_back(findOp("sum"));
  if (!hasOp) opts->ops.resize(1);  // data movement: one pass, reported as redop "none"
  return true;
}

std::vector<size_t> sweepSizes(const PerfOptions& opts) {
  std::vector<size_t> sizes;
  size_t size = opts.minBytes;
  while (size <= opts.maxBytes) {
    sizes.push_back(size);
    size_t next;
    if (opts.stepFactor > 1) {
      if (size > SIZE_MAX / opts.stepFactor) break;
      next = size * opts.stepFactor;
    } else {
      if (size > SIZE_MAX - opts.stepBytes) break;
      next = size + opts.stepBytes;
    }
    if (next <= size) break;  // 0 * factor, or a zero step: one size only
    size = next;
  }
  return sizes;
}

}  // namespace braid::perf
