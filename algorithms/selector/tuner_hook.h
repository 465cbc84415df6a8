// What the selector asks of a tuner plugin (src/core/tuner_plugin.h implements it over NCCL's tuner ABI,
// include/nccl_tuner.h): given the predicted time of every algorithm/protocol pair braid can run for one
// collective, the plugin may edit the table and the channel count. Kept abstract so the selector does not know
// about dlopen or ABI versions, and so tests can hand it an editor of their own.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "algorithms/selector/algo_filter.h"

namespace braid {

struct GpuConstants;  // gpu_model.h

// NCCL's cost table: microseconds per [algorithm][protocol] in NCCL's ids (AlgoId / ProtoId), -1 where the pair is
// not offered.
struct CostTable {
  static constexpr float kIgnore = -1.0f;
  float us[kAlgos][kProtos];
  CostTable() {
    for (auto& row : us)
      for (float& v : row) v = kIgnore;
  }
};

class TunerHook {
 public:
  virtual ~TunerHook() = default;
  // Edits `table` for a collective of `bytes` (NCCL's nBytes: type size x the larger of the send and receive counts,
  // so all-gather and reduce-scatter give their full buffer); *nChannels starts at 0 and is
  // left 0 unless the plugin sets a count. False: the plugin failed (it logged why); the selector's own choice
  // stands.
  virtual bool editCosts(FilterColl coll, size_t bytes, CostTable* table, int* nChannels) = 0;
  // For the logs: "name (file, ABI vN)".
  virtual const char* describe() const = 0;
  // What must be the same on every rank: "name/vN" (the file may lie elsewhere on another host).
  virtual std::string identity() const = 0;
  // The GPU-model constants as the plugin left them at init (ABI v5+: NCCL hands them over to be edited), when it
  // changed any; null otherwise. The communicator rebuilds NCCL's GPU model from them.
  virtual std::shared_ptr<const GpuConstants> constants() const { return nullptr; }
};

}  // namespace braid
