#include "tools/trainer/config.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "tools/common/json.h"

namespace braid::trainer {

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

namespace {

// Reads the members of one JSON object, each with a handler; a member without a handler is rejected by name.
class ObjectReader {
 public:
  using Handler = std::function<bool(const std::string& path, const JsonValue& v)>;

  ObjectReader(std::string prefix, std::string* error) : prefix_(std::move(prefix)), error_(error) {}

  void on(const std::string& key, Handler h) { handlers_.emplace_back(key, std::move(h)); }

  bool read(const JsonValue& obj, const std::string& unsupportedHint) {
    if (obj.kind != JsonValue::Kind::kObject) {
      *error_ = "'" + name() + "' must be an object, got " + obj.show();
      return false;
    }
    for (const auto& m : obj.members) {
      const std::string path = prefix_.empty() ? m.first : prefix_ + "." + m.first;
      const Handler* h = nullptr;
      for (const auto& e : handlers_) {
        if (e.first == m.first) h = &e.second;
      }
      if (h == nullptr) {
        *error_ = "unsupported config key '" + path + "' (value " + m.second.show() + ")" + unsupportedHint;
        return false;
      }
      if (m.second.kind == JsonValue::Kind::kString && m.second.text == "auto") {
        *error_ = "config key '" + path +
                  "' is \"auto\": braid-train resolves no \"auto\" values (the HF Trainer integration does that); "
                  "write the number";
        return false;
      }
      if (!(*h)(path, m.second)) return false;
    }
    return true;
  }

 private:
  std::string name() const { return prefix_.empty() ? "<top level>" : prefix_; }

  std::string prefix_;
  std::string* error_;
  std::vector<std::pair<std::string, Handler>> handlers_;
};

bool bad(std::string* error, const std::string& path, const JsonValue& v, const std::string& want) {
  *error = "config key '" + path + "' has value " + v.show() + ": " + want;
  return false;
}

bool readInt(std::string* error, const std::string& path, const JsonValue& v, int64_t lo, int64_t hi, int64_t* out) {
  if (v.kind != JsonValue::Kind::kNumber || v.number != std::floor(v.number) || v.number < static_cast<double>(lo) ||
      v.number > static_cast<double>(hi)) {
    return bad(error, path, v, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = static_cast<int64_t>(v.number);
  return true;
}

bool readIntI(std::string* error, const std::string& path, const JsonValue& v, int64_t lo, int64_t hi, int* out) {
  int64_t x = 0;
  if (!readInt(error, path, v, lo, hi, &x)) return false;
  *out = static_cast<int>(x);
  return true;
}

bool readReal(std::string* error, const std::string& path, const JsonValue& v, double lo, double hi, double* out) {
  if (v.kind != JsonValue::Kind::kNumber || !(v.number >= lo && v.number <= hi)) {
    std::ostringstream want;
    want << "expected a number in [" << lo << ", " << hi << "]";
    return bad(error, path, v, want.str());
  }
  *out = v.number;
  return true;
}

bool readBool(std::string* error, const std::string& path, const JsonValue& v, bool* out) {
  if (v.kind != JsonValue::Kind::kBool) return bad(error, path, v, "expected true or false");
  *out = v.boolean;
  return true;
}

constexpr int64_t kMaxElems = int64_t{1} << 40;

}  // namespace

bool parseTrainConfig(const std::string& text, int worldSize, TrainConfig* out, std::string* error) {
  JsonValue root;
  std::string jsonError;
  if (!parseJson(text, &root, &jsonError)) {
    *error = "config is not valid JSON: " + jsonError;
    return false;
  }
  TrainConfig c;
  bool bf16 = false, fp16 = false;
  bool sawCommType = false;
  std::string commType;
  std::string* e = error;

  ObjectReader zero("zero_optimization", e);
  zero.on("stage", [&](auto& p, auto& v) { return readIntI(e, p, v, 0, 3, &c.stage); });
  zero.on("reduce_bucket_size", [&](auto& p, auto& v) { return readInt(e, p, v, 1, kMaxElems, &c.reduceBucketSize); });
  zero.on("allgather_bucket_size",
          [&](auto& p, auto& v) { return readInt(e, p, v, 1, kMaxElems, &c.allgatherBucketSize); });
  zero.on("overlap_comm", [&](auto& p, auto& v) { return readBool(e, p, v, &c.overlapComm); });
  zero.on("contiguous_gradients", [&](auto& p, auto& v) { return readBool(e, p, v, &c.contiguousGradients); });
  zero.on("stage3_prefetch_bucket_size",
          [&](auto& p, auto& v) { return readInt(e, p, v, 0, kMaxElems, &c.prefetchBucketSize); });
  zero.on("stage3_param_persistence_threshold",
          [&](auto& p, auto& v) { return readInt(e, p, v, 0, kMaxElems, &c.persistenceThreshold); });
  zero.on("offload_optimizer", [&](auto& p, auto& v) {
    ObjectReader off(p, e);
    off.on("device", [&](auto& q, auto& w) {
      if (w.kind == JsonValue::Kind::kString && w.text == "none") return true;
      if (w.kind == JsonValue::Kind::kString && w.text == "cpu") {
        c.offloadOptimizerCpu = true;
        return true;
      }
      return bad(e, q, w, "expected \"none\" or \"cpu\" (nvme offload is not implemented)");
    });
    return off.read(v, " (only 'device' is supported)");
  });

  ObjectReader bf("bf16", e);
  bf.on("enabled", [&](auto& p, auto& v) { return readBool(e, p, v, &bf16); });
  ObjectReader fp("fp16", e);
  fp.on("enabled", [&](auto& p, auto& v) { return readBool(e, p, v, &fp16); });
  fp.on("loss_scale", [&](auto& p, auto& v) { return readReal(e, p, v, 0.0, 1e30, &c.staticLossScale); });
  fp.on("initial_scale_power", [&](auto& p, auto& v) { return readIntI(e, p, v, 0, 64, &c.initialScalePower); });
  fp.on("loss_scale_window", [&](auto& p, auto& v) { return readIntI(e, p, v, 1, 1000000000, &c.lossScaleWindow); });
  fp.on("hysteresis", [&](auto& p, auto& v) { return readIntI(e, p, v, 1, 1000000000, &c.hysteresis); });
  fp.on("min_loss_scale", [&](auto& p, auto& v) { return readReal(e, p, v, 1e-30, 1e30, &c.minLossScale); });

  ObjectReader opt("optimizer", e);
  opt.on("type", [&](auto& p, auto& v) {
    if (v.kind == JsonValue::Kind::kString && (v.text == "AdamW" || v.text == "adamw")) return true;
    return bad(e, p, v, "braid-train implements only \"AdamW\"");
  });
  opt.on("params", [&](auto& p, auto& v) {
    ObjectReader params(p, e);
    params.on("lr", [&](auto& q, auto& w) { return readReal(e, q, w, 0.0, 10.0, &c.lr); });
    params.on("betas", [&](auto& q, auto& w) {
      if (w.kind != JsonValue::Kind::kArray || w.items.size() != 2) return bad(e, q, w, "expected [beta1, beta2]");
      return readReal(e, q + "[0]", w.items[0], 0.0, 0.999999, &c.beta1) &&
             readReal(e, q + "[1]", w.items[1], 0.0, 0.999999, &c.beta2);
    });
    params.on("eps", [&](auto& q, auto& w) { return readReal(e, q, w, 1e-30, 1.0, &c.eps); });
    params.on("weight_decay", [&](auto& q, auto& w) { return readReal(e, q, w, 0.0, 10.0, &c.weightDecay); });
    return params.read(v, " (supported: lr, betas, eps, weight_decay)");
  });

  ObjectReader top("", e);
  top.on("zero_optimization", [&](auto&, auto& v) {
    return zero.read(v,
                     " (supported: stage, reduce_bucket_size, allgather_bucket_size, overlap_comm, "
                     "contiguous_gradients, stage3_prefetch_bucket_size, stage3_param_persistence_threshold, "
                     "offload_optimizer)");
  });
  top.on("bf16", [&](auto&, auto& v) { return bf.read(v, " (supported: enabled)"); });
  top.on("fp16", [&](auto&, auto& v) {
    return fp.read(v,
                   " (supported: enabled, loss_scale, initial_scale_power, loss_scale_window, hysteresis, "
                   "min_loss_scale)");
  });
  top.on("gradient_clipping", [&](auto& p, auto& v) { return readReal(e, p, v, 0.0, 1e30, &c.gradientClipping); });
  top.on("train_batch_size", [&](auto& p, auto& v) { return readInt(e, p, v, 1, 1 << 30, &c.trainBatchSize); });
  top.on("train_micro_batch_size_per_gpu",
         [&](auto& p, auto& v) { return readInt(e, p, v, 1, 1 << 30, &c.microBatch); });
  top.on("gradient_accumulation_steps", [&](auto& p, auto& v) { return readInt(e, p, v, 1, 1 << 30, &c.gradAccum); });
  top.on("communication_data_type", [&](auto& p, auto& v) {
    if (v.kind != JsonValue::Kind::kString || (v.text != "fp32" && v.text != "bf16" && v.text != "fp16")) {
      return bad(e, p, v, "expected \"fp32\", \"bf16\" or \"fp16\"");
    }
    sawCommType = true;
    commType = v.text;
    return true;
  });
  top.on("optimizer", [&](auto&, auto& v) { return opt.read(v, " (supported: type, params)"); });
  if (!top.read(root,
                " (supported: zero_optimization, bf16, fp16, gradient_clipping, train_batch_size, "
                "train_micro_batch_size_per_gpu, gradient_accumulation_steps, communication_data_type, optimizer)")) {
    return false;
  }

  if (bf16 && fp16) {
    *error = "config enables both 'bf16.enabled' and 'fp16.enabled'; choose one";
    return false;
  }
  c.precision = bf16 ? Precision::kBf16 : fp16 ? Precision::kFp16 : Precision::kFp32;
  c.commPrecision = c.precision;
  if (sawCommType) {
    const Precision want = commType == "fp32"   ? Precision::kFp32
                           : commType == "bf16" ? Precision::kBf16
                                                : Precision::kFp16;
    if (want != Precision::kFp32 && want != c.precision) {
      *error = "config key 'communication_data_type' has value \"" + commType + "\" but the model runs in " +
               precisionName(c.precision) + "; use \"fp32\" or \"" + precisionName(c.precision) + "\"";
      return false;
    }
    c.commPrecision = want;
  }

  // Batch sizes, resolved as DeepSpeed does: any two of the three determine the third.
  const int64_t w = worldSize;
  int64_t& tbs = c.trainBatchSize;
  int64_t& mb = c.microBatch;
  int64_t& ga = c.gradAccum;
  auto batchError = [&](const std::string& why) {
    *error = "batch config (train_batch_size=" + std::to_string(tbs) +
             ", train_micro_batch_size_per_gpu=" + std::to_string(mb) +
             ", gradient_accumulation_steps=" + std::to_string(ga) + ", world size=" + std::to_string(w) + "): " + why;
    return false;
  };
  if (tbs == 0 && mb == 0) return batchError("set train_batch_size or train_micro_batch_size_per_gpu");
  if (tbs != 0 && mb != 0 && ga != 0) {
    if (tbs != mb * ga * w) return batchError("train_batch_size must equal micro batch x accumulation x world size");
  } else if (tbs != 0 && mb != 0) {
    if (tbs % (mb * w) != 0) return batchError("train_batch_size is not a multiple of micro batch x world size");
    ga = tbs / (mb * w);
  } else if (tbs != 0) {
    if (ga == 0) ga = 1;
    if (tbs % (ga * w) != 0) return batchError("train_batch_size is not a multiple of accumulation x world size");
    mb = tbs / (ga * w);
  } else {
    if (ga == 0) ga = 1;
    tbs = mb * ga * w;
  }
  *out = c;
  return true;
}

bool loadTrainConfig(const std::string& path, int worldSize, TrainConfig* out, std::string* error) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    *error = "config file '" + path + "' is not a regular file";
    return false;
  }
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read config file '" + path + "'";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (!parseTrainConfig(ss.str(), worldSize, out, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace braid::trainer
