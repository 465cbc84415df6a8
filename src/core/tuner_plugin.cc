#include "src/core/tuner_plugin.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "algorithms/selector/gpu_model.h"
#include "include/nccl_tuner.h"
#include "src/common/dyn_lib.h"
#include "src/common/logging.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace {

static_assert(NCCL_NUM_ALGORITHMS == kAlgos && NCCL_NUM_PROTOCOLS == kProtos, "cost table shape is NCCL's");
static_assert(NCCL_ALGO_TREE == static_cast<int>(AlgoId::kTree) && NCCL_ALGO_RING == static_cast<int>(AlgoId::kRing) &&
                  NCCL_ALGO_NVLS == static_cast<int>(AlgoId::kNvls) &&
                  NCCL_ALGO_NVLS_TREE == static_cast<int>(AlgoId::kNvlsTree) &&
                  NCCL_ALGO_PAT == static_cast<int>(AlgoId::kPat),
              "AlgoId follows NCCL's algorithm ids");
static_assert(NCCL_PROTO_LL == static_cast<int>(ProtoId::kLL) &&
                  NCCL_PROTO_LL128 == static_cast<int>(ProtoId::kLL128) &&
                  NCCL_PROTO_SIMPLE == static_cast<int>(ProtoId::kSimple),
              "ProtoId follows NCCL's protocol ids");
// The constants' shapes are braid's model's (readConstants and fillConstants copy them whole).
static_assert(NCCL_NUM_HW_LINKS_V5 == 3 && NCCL_NUM_TUNING_SCALES_V5 == 3 && NCCL_NUM_COMPCAPS_V5 == kGpuArchs &&
                  NCCL_NUM_ALGORITHMS_V5 == kAlgos && NCCL_NUM_PROTOCOLS_V5 == kProtos,
              "NCCL's tuner constants have the shape of braid's GpuConstants");
static_assert(NCCL_HW_NVLINK == 0 && NCCL_HW_PCI == 1 && NCCL_HW_NET == 2, "GpuConstants::hwLat rows are NCCL's");
static_assert(NCCL_VOLTA_COMPCAP_IDX == static_cast<int>(GpuArch::kVolta) &&
                  NCCL_AMPERE_COMPCAP_IDX == static_cast<int>(GpuArch::kAmpere) &&
                  NCCL_HOPPER_COMPCAP_IDX == static_cast<int>(GpuArch::kHopper) &&
                  NCCL_BLACKWELL_COMPCAP_IDX == static_cast<int>(GpuArch::kBlackwell),
              "GpuArch follows NCCL's compute-capability rows");
static_assert(sizeof(GpuConstants::hwLat) == sizeof(ncclTunerConstants_v5_t::hwLatencies) &&
                  sizeof(GpuConstants::baseLat) == sizeof(ncclTunerConstants_v5_t::baseLatencies),
              "the latency tables copy whole");
static_assert(static_cast<int>(FilterColl::kBroadcast) == ncclFuncBroadcast &&
                  static_cast<int>(FilterColl::kReduce) == ncclFuncReduce &&
                  static_cast<int>(FilterColl::kAllGather) == ncclFuncAllGather &&
                  static_cast<int>(FilterColl::kReduceScatter) == ncclFuncReduceScatter &&
                  static_cast<int>(FilterColl::kAllReduce) == ncclFuncAllReduce,
              "FilterColl follows ncclFunc_t");

// The constants a v5+ plugin receives, from NCCL's defaults (row 4 of v7's five compute capabilities, Rubin, gets
// Blackwell's figures: braid's model has no row of its own for it).
template <typename Constants, int kRows>
void fillConstants(Constants* k) {
  const GpuConstants& g = ncclGpuConstants();
  std::memcpy(k->baseLatencies, g.baseLat, sizeof(k->baseLatencies));
  std::memcpy(k->hwLatencies, g.hwLat, sizeof(k->hwLatencies));
  for (int r = 0; r < kRows; ++r) {
    const int src = r < kGpuArchs ? r : kGpuArchs - 1;
    for (int s = 0; s < 3; ++s) {
      k->llMaxBws[r][s] = g.llMaxBw[src][s];
      k->perChMaxRingLL128Bws[r][s] = g.perChMaxRingLL128Bw[src][s];
      k->perChMaxTreeLL128Bws[r][s] = g.perChMaxTreeLL128Bw[src][s];
      k->perChMaxTreeBws[r][s] = g.perChMaxTreeBw[src][s];
      k->perChMaxNVLSTreeBws[r][s] = g.perChMaxNvlsTreeBw[src][s];
    }
  }
}

// What the plugin left in `k` after its init, as braid's model reads it; null when nothing changed. v7's fifth row
// (Rubin) has no row in braid's model and is not read.
template <typename Constants, int kRows>
std::shared_ptr<const GpuConstants> readConstants(const Constants& k) {
  auto g = std::make_shared<GpuConstants>(ncclGpuConstants());
  std::memcpy(g->baseLat, k.baseLatencies, sizeof(g->baseLat));
  std::memcpy(g->hwLat, k.hwLatencies, sizeof(g->hwLat));
  for (int r = 0; r < kRows && r < kGpuArchs; ++r) {
    for (int s = 0; s < 3; ++s) {
      g->llMaxBw[r][s] = k.llMaxBws[r][s];
      g->perChMaxRingLL128Bw[r][s] = k.perChMaxRingLL128Bws[r][s];
      g->perChMaxTreeLL128Bw[r][s] = k.perChMaxTreeLL128Bws[r][s];
      g->perChMaxTreeBw[r][s] = k.perChMaxTreeBws[r][s];
      g->perChMaxNvlsTreeBw[r][s] = k.perChMaxNVLSTreeBws[r][s];
    }
  }
  if (std::memcmp(g.get(), &ncclGpuConstants(), sizeof(GpuConstants)) == 0) return nullptr;
  return g;
}

class TunerPlugin final : public TunerHook {
 public:
  TunerPlugin(void* handle, std::string path, int version, const void* table)
      : handle_(handle), path_(std::move(path)), version_(version), table_(table) {
    const char* n = *static_cast<const char* const*>(table);  // every version's first member is the name
    name_ = n != nullptr ? n : "?";
    description_ = strPrintf("%s (%s, ncclTunerPlugin_v%d)", name_.c_str(), path_.c_str(), version_);
  }
  ~TunerPlugin() override {
    if (initialized_) {
      const ncclResult_t rc =
          version_ >= 5 ? tableAs<ncclTuner_v5_t>()->finalize(ctx_) : tableAs<ncclTuner_v3_t>()->destroy(ctx_);
      if (rc != ncclSuccess) BRAID_WARN("TUNER/Plugin: %s: finalize returned %d", description_.c_str(), rc);
    }
    dlclose(handle_);
  }
  TunerPlugin(const TunerPlugin&) = delete;
  TunerPlugin& operator=(const TunerPlugin&) = delete;

  ncclResult_t init(const TunerCommInfo& info) {
    const size_t nranks = static_cast<size_t>(info.nranks), nNodes = static_cast<size_t>(info.nNodes);
    ncclResult_t rc;
    if (version_ >= 5) {
      ncclNvlDomainInfo_v5_t nvl{info.nNodes, info.minLocalRanks, info.maxLocalRanks};
      if (version_ == 7) {
        ncclTunerConstants_v7_t k;
        fillConstants<ncclTunerConstants_v7_t, NCCL_NUM_COMPCAPS_V7>(&k);
        rc = tableAs<ncclTuner_v7_t>()->init(&ctx_, info.commId, nranks, nNodes, net::netLogger, &nvl, &k);
        if (rc == ncclSuccess) constants_ = readConstants<ncclTunerConstants_v7_t, NCCL_NUM_COMPCAPS_V7>(k);
      } else {
        ncclTunerConstants_v5_t k;
        fillConstants<ncclTunerConstants_v5_t, NCCL_NUM_COMPCAPS_V5>(&k);
        rc = tableAs<ncclTuner_v5_t>()->init(&ctx_, info.commId, nranks, nNodes, net::netLogger, &nvl, &k);
        if (rc == ncclSuccess) constants_ = readConstants<ncclTunerConstants_v5_t, NCCL_NUM_COMPCAPS_V5>(k);
      }
    } else {
      rc = tableAs<ncclTuner_v3_t>()->init(nranks, nNodes, net::netLogger, &ctx_);
    }
    initialized_ = rc == ncclSuccess;
    return rc;
  }

  bool editCosts(FilterColl coll, size_t bytes, CostTable* table, int* nChannels) override {
    const auto func = static_cast<ncclFunc_t>(static_cast<int>(coll));
    // NCCL hands over its float[algo][proto] array cast to float**; plugins cast it back.
    float** t = reinterpret_cast<float**>(table->us);
    const int pipeOps = 1;  // braid asks about each collective on its own
    const int regBuff = 0;  // braid's choice does not depend on the buffers' registration
    ncclResult_t rc;
    if (version_ == 3) {
      rc = tableAs<ncclTuner_v3_t>()->getCollInfo(ctx_, func, bytes, pipeOps, t, kAlgos, kProtos, nChannels);
    } else {
      // v4 .. v7 share getCollInfo's signature and place in the table.
      using GetCollInfo = ncclResult_t (*)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*);
      GetCollInfo fn = version_ == 4 ? tableAs<ncclTuner_v4_t>()->getCollInfo : tableAs<ncclTuner_v5_t>()->getCollInfo;
      rc = fn(ctx_, func, bytes, pipeOps, t, kAlgos, kProtos, regBuff, nChannels);
    }
    if (rc == ncclSuccess) return true;
    std::call_once(warnedFailure_, [&] {
      BRAID_WARN("TUNER/Plugin: %s: getCollInfo(%s, %zu bytes) returned %d: braid's model chooses (warned once)",
                 description_.c_str(), filterCollName(coll), bytes, rc);
    });
    return false;
  }

  const char* describe() const override { return description_.c_str(); }
  std::string identity() const override { return strPrintf("%s/v%d", name_.c_str(), version_); }
  std::shared_ptr<const GpuConstants> constants() const override { return constants_; }

 private:
  template <typename T>
  const T* tableAs() const {
    return static_cast<const T*>(table_);
  }

  void* handle_;
  std::string path_;
  int version_;
  const void* table_;
  std::string name_, description_;
  void* ctx_ = nullptr;
  bool initialized_ = false;
  std::shared_ptr<const GpuConstants> constants_;
  std::once_flag warnedFailure_;
};

}  // namespace

std::shared_ptr<TunerHook> loadTuner(const std::string& spec, const std::string& netSpec, const TunerCommInfo& info) {
  if (spec == "none") return nullptr;
  std::vector<std::string> candidates = pluginCandidates("nccl-tuner", spec);
  // One library may provide several plugin kinds: an unset setting also looks in the net plugin's library.
  if (spec.empty() && netSpec != "none") {
    for (const std::string& c : pluginCandidates("nccl-net", netSpec)) candidates.push_back(c);
  }
  for (const std::string& c : candidates) {
    std::string path, failure;
    void* handle = openPluginLibrary({c}, &path, &failure);
    if (handle == nullptr) {
      if (!spec.empty() && info.rank == 0) BRAID_INFO(kLogInit | kLogTuning, "TUNER/Plugin: %s", failure.c_str());
      continue;
    }
    for (int v = 7; v >= 3; --v) {
      const std::string symbol = strPrintf("ncclTunerPlugin_v%d", v);
      const void* table = dlsym(handle, symbol.c_str());
      if (table == nullptr) continue;
      auto plugin = std::make_shared<TunerPlugin>(handle, path, v, table);
      const ncclResult_t rc = plugin->init(info);
      if (rc != ncclSuccess) {
        BRAID_WARN("TUNER/Plugin: %s: init returned %d on rank %d: braid's model tunes this communicator",
                   plugin->describe(), rc, info.rank);
        return nullptr;
      }
      BRAID_INFO(kLogInit | kLogTuning, "TUNER/Plugin: rank %d: using %s", info.rank, plugin->describe());
      return plugin;
    }
    // The net plugin's library need not hold a tuner; a library the setting named must.
    if (!spec.empty()) {
      BRAID_WARN(
          "TUNER/Plugin: %s exports none of ncclTunerPlugin_v7 .. _v3 (older ABIs are not supported): "
          "braid's model tunes this communicator",
          path.c_str());
    }
    dlclose(handle);
    if (!spec.empty()) return nullptr;
  }
  if (!spec.empty()) {
    std::string tried;
    for (const std::string& c : candidates) tried += (tried.empty() ? "" : ", ") + c;
    BRAID_WARN(
        "TUNER/Plugin: NCCL_TUNER_PLUGIN=%s could not be loaded (tried %s): braid's model tunes this "
        "communicator",
        spec.c_str(), tried.c_str());
  }
  return nullptr;
}

}  // namespace braid
