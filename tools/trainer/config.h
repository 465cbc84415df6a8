// braid-train's training configuration, read from a DeepSpeed-style JSON file. Every key braid-train does not
// implement, and every value it cannot honour, is rejected with a message naming the key and the value: nothing is
// silently downgraded (llm.c's quiet ZeRO-2/3 -> 0 fallback is the counter-example).
#pragma once

#include <cstdint>
#include <string>

namespace braid::trainer {

// Storage type of the working parameters and gradients. kFp32 keeps no separate master copy.
enum class Precision { kFp32, kBf16, kFp16 };

const char* precisionName(Precision p);

struct TrainConfig {
  // zero_optimization
  int stage = 0;
  int64_t reduceBucketSize = 500000000;     // elements per gradient all-reduce / reduce-scatter bucket
  int64_t allgatherBucketSize = 500000000;  // elements per post-step parameter all-gather (stages 1, 2)
  bool overlapComm = false;                 // collectives on a background thread, overlapping compute
  bool contiguousGradients = true;          // pack several units into one bucket (false: one unit per collective)
  int64_t prefetchBucketSize = 50000000;    // stage 3: elements gathered ahead of the unit being computed
  int64_t persistenceThreshold = 100000;    // stage 3: units with at most this many elements stay gathered
  bool offloadOptimizerCpu = false;         // offload_optimizer.device == "cpu"

  // Mixed precision
  Precision precision = Precision::kFp32;
  Precision commPrecision = Precision::kFp32;  // data type of gradient reductions
  double staticLossScale = 0.0;                // fp16.loss_scale; 0 = dynamic
  int initialScalePower = 16;
  int lossScaleWindow = 1000;
  int hysteresis = 2;
  double minLossScale = 1.0;

  double gradientClipping = 0.0;  // 0 = off

  // Batch: train_batch_size = micro * accumulation * world size.
  int64_t trainBatchSize = 0;
  int64_t microBatch = 0;
  int64_t gradAccum = 0;

  // optimizer: AdamW
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
};

// Parses and validates `text` for a run on `worldSize` ranks. On failure returns false with *error naming the key.
bool parseTrainConfig(const std::string& text, int worldSize, TrainConfig* out, std::string* error);

// Reads `path` and parses it; an unreadable file is an error naming the path.
bool loadTrainConfig(const std::string& path, int worldSize, TrainConfig* out, std::string* error);

}  // namespace braid::trainer
