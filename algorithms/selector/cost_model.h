// The selector's cost model: predicted time = alpha + bytes / beta per (collective, algorithm, rank count), with
// pins that force an algorithm for a size range. Built-in figures come from measurements on a 2-core host (see
// docs/perf.md); `perf/calibrate` measures the machine it runs on and writes a file the library loads with
// BRAID_TUNING_FILE:
//
//   # comments and blank lines are ignored
//   cost allreduce ring 4 12.5 1.8      collective, algorithm, ranks, alpha (us), beta (GB/s of the buffer size)
//   pin allreduce 0 65536 tree          collective, min and max bytes (inclusive), algorithm
//
// Collective and algorithm names are NCCL_ALGO's (case-insensitive). A cost line applies to its rank count; for
// other counts the nearest measured count is scaled (alpha by the algorithm's step count, beta kept). Pins are
// honoured only when NCCL_ALGO allows the algorithm.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/selector/algo_filter.h"
#include "src/common/status.h"

namespace braid {

struct AlgoCost {
  double alphaUs = 0;
  double betaGBps = 1;
};

class CostModel {
 public:
  CostModel() = default;
  // Parses a tuning file; errors name the file, the line and the token.
  static Result<CostModel> load(const std::string& path);

  // Predicted microseconds for `bytes` (NCCL's count x type size) of `coll` with `algo` over `nranks` ranks.
  double predictUs(FilterColl coll, AlgoId algo, int nranks, int cpus, size_t bytes) const;
  // The algorithm a pin forces for this size, or -1.
  int pinned(FilterColl coll, size_t bytes) const;
  const std::string& source() const { return source_; }
  // A hash of the file's text (0 for the built-in figures): ranks compare it to be sure they share one model.
  uint64_t contentHash() const { return contentHash_; }

 private:
  std::map<std::tuple<int, int, int>, AlgoCost> costs_;  // (coll, algo, nranks)
  struct Pin {
    int coll;
    size_t minBytes, maxBytes;
    int algo;
  };
  std::vector<Pin> pins_;
  std::string source_ = "built-in";
  uint64_t contentHash_ = 0;
};

}  // namespace braid
