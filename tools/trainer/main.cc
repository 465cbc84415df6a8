// braid-train: trains a small char-level transformer with ZeRO stages 0-3 over braid's public NCCL API.
//   braidrun -np 4 braid-train --config ds.json --steps 200
// Launch: braidrun/torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), mpirun (OMPI_COMM_WORLD_*), Slurm, or
// plain (one rank). See docs/trainer.md.
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/trainer/comm.h"
#include "tools/trainer/config.h"
#include "tools/trainer/corpus.h"
#include "tools/trainer/engine.h"

namespace braid::trainer {
namespace {

struct Options {
  std::string config;
  ModelDims dims;
  int64_t steps = 20;
  uint64_t seed = 1;
  int64_t corpusBytes = 300000;
  std::string corpusFile;
  std::string writeCorpus;
  std::string saveDir;
  int64_t saveEvery = 0;
  std::string loadDir;
  std::string logFile;
  int64_t logEvery = 1;
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: braid-train --config FILE [options]\n"
               "  --config FILE        DeepSpeed-style JSON (zero_optimization, bf16, fp16, batch sizes, optimizer)\n"
               "  --layers N (2) --channels N (32) --heads N (4) --ctx N (16)   model shape\n"
               "  --steps N (20)       optimizer steps to run (counted from the loaded step)\n"
               "  --seed N (1)         initial weights, corpus and batch order\n"
               "  --corpus-bytes N (300000)  size of the generated corpus; --corpus FILE reads a text instead\n"
               "  --write-corpus FILE  write the generated corpus and exit\n"
               "  --save DIR [--save-every N]  sharded checkpoint at the end (and every N steps)\n"
               "  --load DIR           resume from a sharded checkpoint written by any number of ranks\n"
               "  --log FILE           rank 0 writes step,loss,loss_hex,grad_norm,tokens_per_s,comm_ms,wait_ms\n"
               "  --log-every N (1)    print every N steps\n");
}

bool parseInt(const std::string& name, const char* text, int64_t lo, int64_t hi, int64_t* out, std::string* error) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    *error = "argument " + name + " has value '" + text + "': expected an integer in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]";
    return false;
  }
  *out = v;
  return true;
}

bool parseArgs(int argc, char** argv, Options* o, std::string* error) {
  o->dims.vocab = alphabetSize();
  o->dims.ctx = 16;
  o->dims.channels = 32;
  o->dims.layers = 2;
  o->dims.heads = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      *error = "argument " + a + " needs a value (or is unknown; see --help)";
      return false;
    }
    const char* v = argv[++i];
    int64_t n = 0;
    if (a == "--config") {
      o->config = v;
    } else if (a == "--corpus") {
      o->corpusFile = v;
    } else if (a == "--write-corpus") {
      o->writeCorpus = v;
    } else if (a == "--save") {
      o->saveDir = v;
    } else if (a == "--load") {
      o->loadDir = v;
    } else if (a == "--log") {
      o->logFile = v;
    } else if (a == "--layers" || a == "--channels" || a == "--heads" || a == "--ctx") {
      if (!parseInt(a, v, 1, 4096, &n, error)) return false;
      (a == "--layers"     ? o->dims.layers
       : a == "--channels" ? o->dims.channels
       : a == "--heads"    ? o->dims.heads
                           : o->dims.ctx) = static_cast<int>(n);
    } else if (a == "--steps") {
      if (!parseInt(a, v, 0, int64_t{1} << 40, &o->steps, error)) return false;
    } else if (a == "--seed") {
      if (!parseInt(a, v, 0, int64_t{1} << 62, &n, error)) return false;
      o->seed = static_cast<uint64_t>(n);
    } else if (a == "--corpus-bytes") {
      if (!parseInt(a, v, 1024, int64_t{1} << 32, &o->corpusBytes, error)) return false;
    } else if (a == "--save-every") {
      if (!parseInt(a, v, 0, int64_t{1} << 40, &o->saveEvery, error)) return false;
    } else if (a == "--log-every") {
      if (!parseInt(a, v, 1, int64_t{1} << 40, &o->logEvery, error)) return false;
    } else {
      *error = "unknown argument '" + a + "' (see --help)";
      return false;
    }
  }
  if (o->dims.channels % o->dims.heads != 0) {
    *error = "argument --heads has value " + std::to_string(o->dims.heads) + ": it must divide --channels (" +
             std::to_string(o->dims.channels) + ")";
    return false;
  }
  if (o->writeCorpus.empty() && o->config.empty()) {
    *error = "argument --config is required (a DeepSpeed-style JSON file)";
    return false;
  }
  return true;
}

// A fingerprint of everything that must match on every rank: the resolved config, the model shape, the data and
// the run length. Ranks that disagree would issue different collectives and hang until BRAID_TIMEOUT.
uint64_t settingsHash(const Options& o, const TrainConfig& c, size_t corpusTokens) {
  std::ostringstream t;
  t << std::hexfloat << c.stage << ' ' << c.reduceBucketSize << ' ' << c.allgatherBucketSize << ' ' << c.overlapComm
    << ' ' << c.contiguousGradients << ' ' << c.prefetchBucketSize << ' ' << c.persistenceThreshold << ' '
    << c.offloadOptimizerCpu << ' ' << static_cast<int>(c.precision) << ' ' << static_cast<int>(c.commPrecision) << ' '
    << c.staticLossScale << ' ' << c.initialScalePower << ' ' << c.lossScaleWindow << ' ' << c.hysteresis << ' '
    << c.minLossScale << ' ' << c.gradientClipping << ' ' << c.trainBatchSize << ' ' << c.microBatch << ' '
    << c.gradAccum << ' ' << c.lr << ' ' << c.beta1 << ' ' << c.beta2 << ' ' << c.eps << ' ' << c.weightDecay << " | "
    << o.dims.vocab << ' ' << o.dims.ctx << ' ' << o.dims.channels << ' ' << o.dims.layers << ' ' << o.dims.heads << ' '
    << o.steps << ' ' << o.seed << ' ' << corpusTokens << ' ' << o.loadDir << ' ' << !o.saveDir.empty();
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char ch : t.str()) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

int64_t formulaBytes(int stage, int64_t psi, int world, Precision p, int64_t* params, int64_t* grads, int64_t* opt) {
  const int64_t w = p == Precision::kFp32 ? 4 : 2;
  const int64_t k = p == Precision::kFp32 ? 8 : 12;  // Adam m, v (+ fp32 master in mixed precision)
  *params = stage >= 3 ? w * psi / world : w * psi;
  *grads = stage >= 2 ? w * psi / world : w * psi;
  *opt = stage >= 1 ? k * psi / world : k * psi;
  return *params + *grads + *opt;
}

int run(int argc, char** argv) {
  Options o;
  std::string error;
  if (!parseArgs(argc, argv, &o, &error)) {
    std::fprintf(stderr, "braid-train: %s\n", error.c_str());
    return 2;
  }
  std::string text;
  if (!o.corpusFile.empty()) {
    std::ifstream in(o.corpusFile);
    if (!in) {
      std::fprintf(stderr, "braid-train: cannot read --corpus '%s'\n", o.corpusFile.c_str());
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else {
    text = generateCorpus(static_cast<size_t>(o.corpusBytes), o.seed);
  }
  if (!o.writeCorpus.empty()) {
    std::ofstream out(o.writeCorpus);
    out << text;
    return out ? 0 : 1;
  }
  std::vector<int> tokens;
  if (!tokenize(text, &tokens, &error)) {
    std::fprintf(stderr, "braid-train: corpus: %s\n", error.c_str());
    return 2;
  }
  if (tokens.size() < static_cast<size_t>(o.dims.ctx) + 2) {
    std::fprintf(stderr, "braid-train: the corpus (%zu characters) is shorter than --ctx %d + 2\n", tokens.size(),
                 o.dims.ctx);
    return 2;
  }
  if (!o.saveDir.empty() && ::mkdir(o.saveDir.c_str(), 0755) != 0 && errno != EEXIST) {
    // Fail before training, not after it.
    std::fprintf(stderr, "braid-train: argument --save has value '%s': cannot create it: %s\n", o.saveDir.c_str(),
                 std::strerror(errno));
    return 2;
  }
  LaunchEnv env;
  if (!detectLaunch(&env, &error)) {
    std::fprintf(stderr, "braid-train: %s\n", error.c_str());
    return 2;
  }
  TrainConfig cfg;
  if (!loadTrainConfig(o.config, env.worldSize, &cfg, &error)) {
    std::fprintf(stderr, "braid-train: %s\n", error.c_str());
    return 2;
  }
  ncclComm_t comm = nullptr;
  if (!initComm(env, &comm, &error)) {
    std::fprintf(stderr, "braid-train: rank %d: %s\n", env.rank, error.c_str());
    return 1;
  }
  const bool lead = env.rank == 0;
  if (env.worldSize > 1) {
    uint64_t range[2] = {settingsHash(o, cfg, tokens.size()), 0};
    range[1] = range[0];
    const ncclResult_t a = ncclAllReduce(&range[0], &range[0], 1, ncclUint64, ncclMin, comm, nullptr);
    const ncclResult_t b =
        a == ncclSuccess ? ncclAllReduce(&range[1], &range[1], 1, ncclUint64, ncclMax, comm, nullptr) : a;
    if (b != ncclSuccess || range[0] != range[1]) {
      std::fprintf(stderr, "braid-train: rank %d: %s\n", env.rank,
                   b != ncclSuccess ? (std::string("ncclAllReduce (settings check): ") + ncclGetErrorString(b)).c_str()
                                    : "the ranks were given different configs or arguments (model shape, batch, "
                                      "stage, precision, optimizer, seed, corpus, steps or checkpoint directory)");
      (void)ncclCommAbort(comm);
      return 2;
    }
  }
  int status = 0;
  {
    CommQueue queue(comm, cfg.overlapComm);
    ZeroEngine engine(o.dims, cfg, o.seed, env.rank, env.worldSize, &queue);
    if (!engine.init(&error) || (!o.loadDir.empty() && !engine.load(o.loadDir, &error))) {
      std::fprintf(stderr, "braid-train: rank %d: %s\n", env.rank, error.c_str());
      (void)ncclCommAbort(comm);
      return 1;
    }
    const int64_t psi = o.dims.totalParams();
    if (lead) {
      std::printf("braid-train: %d rank(s) via %s, stage %d, %s (reduce in %s), %" PRId64
                  " params (%d layers, C=%d, H=%d, T=%d, V=%d), batch %" PRId64 " = %" PRId64 " micro x %" PRId64
                  " accumulation x %d ranks, overlap_comm %s%s\n",
                  env.worldSize, env.source.empty() ? "no launcher" : env.source.c_str(), cfg.stage,
                  precisionName(cfg.precision), precisionName(cfg.commPrecision), psi, o.dims.layers, o.dims.channels,
                  o.dims.heads, o.dims.ctx, o.dims.vocab, cfg.trainBatchSize, cfg.microBatch, cfg.gradAccum,
                  env.worldSize, cfg.overlapComm ? "on" : "off",
                  o.loadDir.empty()
                      ? ""
                      : (", resumed at step " + std::to_string(engine.step()) + " from " + o.loadDir).c_str());
      if (cfg.offloadOptimizerCpu) {
        std::printf(
            "braid-train: offload_optimizer.device cpu: optimizer state is in host memory (as is everything "
            "in this host build)\n");
      }
    }
    FILE* log = nullptr;
    if (lead && !o.logFile.empty()) {
      log = std::fopen(o.logFile.c_str(), "w");
      if (log == nullptr) std::fprintf(stderr, "braid-train: cannot write --log '%s'\n", o.logFile.c_str());
      if (log != nullptr) std::fprintf(log, "step,loss,loss_hex,grad_norm,tokens_per_s,comm_ms,wait_ms\n");
    }
    const double tokensPerStep = static_cast<double>(cfg.trainBatchSize) * o.dims.ctx;
    double sumSeconds = 0.0, sumComm = 0.0, sumWait = 0.0;
    const int64_t end = engine.step() + o.steps;
    while (engine.step() < end) {
      const int64_t step = engine.step();
      StepStats s;
      const auto t0 = std::chrono::steady_clock::now();
      if (!engine.trainStep(tokens, &s, &error)) {
        std::fprintf(stderr, "braid-train: rank %d: step %" PRId64 ": %s\n", env.rank, step, error.c_str());
        status = 1;
        break;
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      sumSeconds += seconds;
      sumComm += s.commSeconds;
      sumWait += s.waitSeconds;
      if (lead && (step % o.logEvery == 0 || step + 1 == end)) {
        char scale[64] = "";
        if (cfg.precision == Precision::kFp16) std::snprintf(scale, sizeof(scale), " loss_scale %.17g", s.lossScale);
        std::printf("step %" PRId64 " loss %.6f (%a) grad_norm %.4f%s%s tokens/s %.0f comm %.2f ms (waited %.2f ms)\n",
                    step, s.loss, s.loss, s.gradNorm, scale, s.skipped ? " SKIPPED (fp16 overflow)" : "",
                    tokensPerStep / seconds, s.commSeconds * 1e3, s.waitSeconds * 1e3);
      }
      if (log != nullptr) {
        std::fprintf(log, "%" PRId64 ",%.17g,%a,%.9g,%.1f,%.3f,%.3f\n", step, s.loss, s.loss, s.gradNorm,
                     tokensPerStep / seconds, s.commSeconds * 1e3, s.waitSeconds * 1e3);
      }
      if (!o.saveDir.empty() && o.saveEvery > 0 && engine.step() % o.saveEvery == 0 && engine.step() < end) {
        if (!engine.save(o.saveDir, &error)) {
          std::fprintf(stderr, "braid-train: rank %d: %s\n", env.rank, error.c_str());
          status = 1;
          break;
        }
      }
    }
    if (log != nullptr) std::fclose(log);
    if (status == 0 && !o.saveDir.empty() && !engine.save(o.saveDir, &error)) {
      std::fprintf(stderr, "braid-train: rank %d: %s\n", env.rank, error.c_str());
      status = 1;
    }
    if (status == 0 && o.steps > 0) {
      // Memory table: every rank's figures gathered to rank 0.
      const MemoryReport m = engine.memory();
      int64_t mine[6] = {m.params, m.grads, m.optimizer, m.gatheredPeak, m.gradBucketPeak, m.commPeak};
      std::vector<int64_t> all(static_cast<size_t>(6 * env.worldSize));
      queue.run([&] { return ncclAllGather(mine, all.data(), 6, ncclInt64, comm, nullptr); }, "ncclAllGather (memory)");
      if (lead) {
        int64_t fp = 0, fg = 0, fo = 0;
        const int64_t ft = formulaBytes(cfg.stage, psi, env.worldSize, cfg.precision, &fp, &fg, &fo);
        int64_t largest = 0;
        for (int u = 0; u < o.dims.numUnits(); ++u) largest = std::max(largest, o.dims.unitSize(u));
        const int64_t w = cfg.precision == Precision::kFp32 ? 4 : 2;
        std::printf("timing: %.1f tokens/s over %" PRId64 " steps, %.2f ms/step, comm %.2f ms/step (waited %.2f)\n",
                    tokensPerStep * static_cast<double>(o.steps) / sumSeconds, o.steps,
                    sumSeconds * 1e3 / static_cast<double>(o.steps), sumComm * 1e3 / static_cast<double>(o.steps),
                    sumWait * 1e3 / static_cast<double>(o.steps));
        std::printf("memory formula (stage %d, N=%d, psi=%" PRId64 "): params %" PRId64 " grads %" PRId64
                    " optimizer %" PRId64 " total %" PRId64 " (%.2f bytes/param), largest unit %" PRId64 " bytes\n",
                    cfg.stage, env.worldSize, psi, fp, fg, fo, ft, static_cast<double>(ft) / static_cast<double>(psi),
                    largest * w);
        for (int r = 0; r < env.worldSize; ++r) {
          const int64_t* x = all.data() + 6 * r;
          std::printf("memory rank %d: params %" PRId64 " grads %" PRId64 " optimizer %" PRId64 " total %" PRId64
                      " gathered_peak %" PRId64 " grad_bucket_peak %" PRId64 " comm_peak %" PRId64 "\n",
                      r, x[0], x[1], x[2], x[0] + x[1] + x[2], x[3], x[4], x[5]);
        }
      }
    }
    if (status == 0 && !queue.error().empty()) status = 1;
  }
  if (status == 0) {
    (void)ncclCommDestroy(comm);
  } else {
    (void)ncclCommAbort(comm);
  }
  return status;
}

}  // namespace
}  // namespace braid::trainer

int main(int argc, char** argv) {
  return braid::trainer::run(argc, argv);
}
