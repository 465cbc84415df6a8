// The ZeRO engine: stages 0-3 over the model's units, on the public NCCL API.
//
// Every unit u (embedding, each block, head) is one flat parameter of size P, padded to a multiple of the world size
// N; rank r owns the slice [r*S, r*S + S) with S = padded/N (FSDP's flat-parameter sharding). What each stage keeps:
//   stage 0: full params, full grads, full optimizer state; gradients all-reduced in buckets.
//   stage 1: full params and grads, optimizer state for the owned slices; gradients reduce-scattered in buckets
//            after the last micro-step, the owned slices updated, params all-gathered in buckets.
//   stage 2: as 1, but gradients are sharded: each unit's gradient is reduce-scattered (in buckets) as backward
//            produces it, and only the owned slice is kept.
//   stage 3: as 2, and params are sharded: a unit is all-gathered just before its forward and its backward and
//            freed after; with overlap_comm the next units' gathers (up to stage3_prefetch_bucket_size elements)
//            run on the comm thread while the current unit computes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/trainer/comm.h"
#include "tools/trainer/config.h"
#include "tools/trainer/memory.h"
#include "tools/trainer/model.h"

namespace braid::trainer {

struct StepStats {
  double loss = 0.0;         // mean NLL over the global batch
  double gradNorm = 0.0;     // global gradient norm before clipping
  double lossScale = 1.0;    // fp16 loss scale used this step
  bool skipped = false;      // fp16 overflow: the update was skipped
  double commSeconds = 0.0;  // time inside collectives
  double waitSeconds = 0.0;  // time compute waited on them (equals commSeconds without overlap_comm)
};

struct MemoryReport {
  int64_t params = 0, grads = 0, optimizer = 0;                // held between steps
  int64_t gatheredPeak = 0, gradBucketPeak = 0, commPeak = 0;  // transient peaks
};

class ZeroEngine {
 public:
  ZeroEngine(const ModelDims& dims, const TrainConfig& cfg, uint64_t seed, int rank, int worldSize, CommQueue* queue);

  // Allocates the stage's buffers and fills the parameters from the seed (the same full model on every rank).
  bool init(std::string* error);

  // One optimizer step on the global batch of step step(); every rank calls it.
  bool trainStep(const std::vector<int>& tokens, StepStats* stats, std::string* error);

  int64_t step() const { return step_; }
  MemoryReport memory() const;

  // Sharded checkpoints (checkpoint.cc): each rank writes dir/rank<r>-of-<N>.ckpt with its slices of the fp32
  // master weights and Adam moments; load() reads any N's files into this run's M ranks.
  bool save(const std::string& dir, std::string* error);
  bool load(const std::string& dir, std::string* error);

 private:
  struct Unit {
    int64_t size = 0, padded = 0, shard = 0, begin = 0, valid = 0;
    int64_t optBegin = 0, optCount = 0;  // the range this rank's optimizer updates
    bool persistent = false;             // stage 3: small enough to stay gathered
    Buffer param;                        // working params: full padded, or the owned shard (stage 3)
    Buffer full;                         // stage 3: full params while gathered (or persistent)
    Buffer grad;                         // full padded (stages 0, 1) or the owned shard (2, 3)
    Buffer master, m, v;                 // fp32, optCount elements (master only in mixed precision)
    CommQueue::Ticket gatherTicket = 0;
    bool gatherPending = false;
  };
  struct Bucket {
    std::vector<int> units;  // in backward order
    int64_t elems = 0;
  };

  // Stage 3 parameter life cycle and the fp32 view the model computes with.
  void gatherUnit(int u);
  const float* acquire(int u, int direction);
  void release(int u);
  // Gradient hand-off after a unit's backward; flushes a bucket when its last unit is done.
  void unitGradReady(int u, int micro, const float* g);
  void reduceBucket(const Bucket& b, bool firstMicro);
  // Optimizer and parameter refresh.
  bool optimizerStep(StepStats* stats);
  void allGatherParams();
  float* masterOf(int u);
  float gradAt(int u, int64_t fullIndex) const;

  ModelDims dims_;
  TrainConfig cfg_;
  uint64_t seed_;
  int rank_, world_;
  CommQueue* queue_;
  Precision prec_;
  int width_;
  MemoryLedger ledger_;
  std::vector<Unit> units_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucketOf_;
  Model model_;
  std::vector<float> computeParams_, computeGrads_;
  std::vector<Buffer> pendingGrads_;  // stage 2/3 full gradients of the bucket being filled
  int64_t step_ = 0;
  int64_t adamT_ = 0;
  double lossScale_ = 1.0;
  int64_t goodSteps_ = 0;
  int hysteresisLeft_ = 0;
};

ncclDataType_t ncclTypeOf(Precision p);

}  // namespace braid::trainer
