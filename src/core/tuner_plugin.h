// Tuner plugins (include/nccl_tuner.h, NCCL_TUNER_PLUGIN): loads one per communicator, speaks whichever ABI
// version (3 to 7) the library exports, and hands the selector a TunerHook that asks the plugin about each
// collective. The plugin's context is finalized, and the library released, when the hook is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "algorithms/selector/tuner_hook.h"
#include "src/common/status.h"

namespace braid {

// What init() tells the plugin about the communicator.
struct TunerCommInfo {
  uint64_t commId = 0;
  int rank = 0;
  int nranks = 1;
  int nNodes = 1;
  int minLocalRanks = 1, maxLocalRanks = 1;  // ranks per host (braid's NVLink domain is a host)
};

// Loads the tuner NCCL_TUNER_PLUGIN names (the rule is in include/nccl_tuner.h) and calls its init(). Null (and ok)
// when there is none or it cannot be used: a library that does not load or has no tuner symbol (INFO; WARN when the
// setting named it), or an init() that fails (WARN: the communicator is tuned by braid's model). `spec` is the
// setting, `netSpec` NCCL_NET_PLUGIN's (the second place an unset setting looks).
std::shared_ptr<TunerHook> loadTuner(const std::string& spec, const std::string& netSpec, const TunerCommInfo& info);

}  // namespace braid
