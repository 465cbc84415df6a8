#include "tools/trainer/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tools/trainer/corpus.h"
#include "tools/trainer/precision.h"

namespace braid::trainer {

ncclDataType_t ncclTypeOf(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return ncclFloat32;
    case Precision::kBf16:
      return ncclBfloat16;
    case Precision::kFp16:
      return ncclFloat16;
  }
  return ncclFloat32;
}

ZeroEngine::ZeroEngine(const ModelDims& dims, const TrainConfig& cfg, uint64_t seed, int rank, int worldSize,
                       CommQueue* queue)
    : dims_(dims),
      cfg_(cfg),
      seed_(seed),
      rank_(rank),
      world_(worldSize),
      queue_(queue),
      prec_(cfg.precision),
      width_(precisionBytes(cfg.precision)),
      model_(dims, static_cast<int>(cfg.microBatch)) {}

bool ZeroEngine::init(std::string* error) {
  const int numUnits = dims_.numUnits();
  const int stage = cfg_.stage;
  units_.assign(static_cast<size_t>(numUnits), Unit());
  std::vector<float> all;
  initParams(dims_, seed_, &all);
  int64_t offset = 0;
  int64_t maxPadded = 0;
  for (int u = 0; u < numUnits; ++u) {
    Unit& x = units_[static_cast<size_t>(u)];
    x.size = dims_.unitSize(u);
    x.padded = (x.size + world_ - 1) / world_ * world_;
    x.shard = x.padded / world_;
    x.begin = static_cast<int64_t>(rank_) * x.shard;
    x.valid = std::max<int64_t>(0, std::min(x.shard, x.size - x.begin));
    x.optBegin = stage == 0 ? 0 : x.begin;
    x.optCount = stage == 0 ? x.size : x.valid;
    x.persistent = stage == 3 && x.size <= cfg_.persistenceThreshold;
    maxPadded = std::max(maxPadded, x.padded);
    const float* values = all.data() + offset;
    offset += x.size;
    const size_t w = static_cast<size_t>(width_);
    if (stage < 3) {
      x.param = makeBuffer(&ledger_, MemKind::kParams, static_cast<size_t>(x.padded) * w);
      convertBuffer(prec_, x.param->data(), Precision::kFp32, reinterpret_cast<const uint8_t*>(values), x.size);
    } else {
      x.param = makeBuffer(&ledger_, MemKind::kParams, static_cast<size_t>(x.shard) * w);
      convertBuffer(prec_, x.param->data(), Precision::kFp32, reinterpret_cast<const uint8_t*>(values + x.begin),
                    x.valid);
      if (x.persistent) {
        x.full = makeBuffer(&ledger_, MemKind::kParams, static_cast<size_t>(x.padded) * w);
        convertBuffer(prec_, x.full->data(), Precision::kFp32, reinterpret_cast<const uint8_t*>(values), x.size);
      }
    }
    x.grad = makeBuffer(&ledger_, MemKind::kGrads, static_cast<size_t>(stage < 2 ? x.padded : x.shard) * w);
    const size_t optBytes = static_cast<size_t>(x.optCount) * 4;
    if (prec_ != Precision::kFp32) {
      x.master = makeBuffer(&ledger_, MemKind::kOptimizer, optBytes);
      std::memcpy(x.master->data(), values + x.optBegin, optBytes);
    }
    x.m = makeBuffer(&ledger_, MemKind::kOptimizer, optBytes);
    x.v = makeBuffer(&ledger_, MemKind::kOptimizer, optBytes);
  }
  computeParams_.assign(static_cast<size_t>(maxPadded), 0.f);
  computeGrads_.assign(static_cast<size_t>(maxPadded), 0.f);
  pendingGrads_.assign(static_cast<size_t>(numUnits), nullptr);

  // Gradient buckets in backward order: consecutive units up to reduce_bucket_size elements (a larger unit goes
  // alone); contiguous_gradients=false reduces each unit on its own.
  buckets_.clear();
  bucketOf_.assign(static_cast<size_t>(numUnits), -1);
  for (int u = numUnits - 1; u >= 0; --u) {
    const int64_t n = units_[static_cast<size_t>(u)].size;
    if (buckets_.empty() || !cfg_.contiguousGradients || buckets_.back().elems + n > cfg_.reduceBucketSize) {
      buckets_.emplace_back();
    }
    buckets_.back().units.push_back(u);
    buckets_.back().elems += n;
    bucketOf_[static_cast<size_t>(u)] = static_cast<int>(buckets_.size()) - 1;
  }
  if (prec_ == Precision::kFp16) {
    lossScale_ = cfg_.staticLossScale > 0 ? cfg_.staticLossScale : std::ldexp(1.0, cfg_.initialScalePower);
    hysteresisLeft_ = cfg_.hysteresis;
  }
  ledger_.resetPeaks();
  (void)error;
  return true;
}

MemoryReport ZeroEngine::memory() const {
  MemoryReport r;
  r.params = ledger_.current(MemKind::kParams);
  r.grads = ledger_.current(MemKind::kGrads);
  r.optimizer = ledger_.current(MemKind::kOptimizer);
  r.gatheredPeak = ledger_.peak(MemKind::kGathered);
  r.gradBucketPeak = ledger_.peak(MemKind::kGradBuckets);
  r.commPeak = ledger_.peak(MemKind::kCommBuffers);
  return r;
}

float* ZeroEngine::masterOf(int u) {
  Unit& x = units_[static_cast<size_t>(u)];
  if (prec_ != Precision::kFp32) return x.master->floats();
  // fp32: the working parameters are the master copy.
  return cfg_.stage < 3 ? x.param->floats() + x.optBegin : x.param->floats();
}

float ZeroEngine::gradAt(int u, int64_t fullIndex) const {
  const Unit& x = units_[static_cast<size_t>(u)];
  const int64_t i = cfg_.stage < 2 ? fullIndex : fullIndex - x.begin;
  return loadAs(prec_, x.grad->data(), i);
}

void ZeroEngine::gatherUnit(int u) {
  Unit& x = units_[static_cast<size_t>(u)];
  x.full = makeBuffer(&ledger_, MemKind::kGathered, static_cast<size_t>(x.padded) * static_cast<size_t>(width_));
  const void* send = x.param->data();
  void* recv = x.full->data();
  const size_t count = static_cast<size_t>(x.shard);
  const ncclDataType_t type = ncclTypeOf(prec_);
  ncclComm_t comm = queue_->comm();
  x.gatherTicket = queue_->submit([=] { return ncclAllGather(send, recv, count, type, comm, nullptr); },
                                  "ncclAllGather (stage 3 parameters)");
  x.gatherPending = true;
}

const float* ZeroEngine::acquire(int u, int direction) {
  Unit& x = units_[static_cast<size_t>(u)];
  const uint8_t* src = nullptr;
  if (cfg_.stage < 3) {
    src = x.param->data();
  } else {
    if (!x.persistent) {
      if (!x.full) gatherUnit(u);
      if (x.gatherPending) {
        queue_->wait(x.gatherTicket);
        x.gatherPending = false;
      }
      // Prefetch: start the gathers of the next units in this direction while this one computes.
      if (cfg_.overlapComm && cfg_.prefetchBucketSize > 0) {
        int64_t ahead = 0;
        for (int v = u + direction; v >= 0 && v < dims_.numUnits(); v += direction) {
          Unit& y = units_[static_cast<size_t>(v)];
          if (y.persistent) continue;
          ahead += y.size;
          if (ahead > cfg_.prefetchBucketSize) break;
          if (!y.full) gatherUnit(v);
        }
      }
    }
    src = x.full->data();
  }
  if (prec_ == Precision::kFp32) return reinterpret_cast<const float*>(src);
  convertBuffer(Precision::kFp32, reinterpret_cast<uint8_t*>(computeParams_.data()), prec_, src, x.size);
  return computeParams_.data();
}

void ZeroEngine::release(int u) {
  Unit& x = units_[static_cast<size_t>(u)];
  if (cfg_.stage == 3 && !x.persistent && !x.gatherPending) x.full.reset();
}

bool ZeroEngine::trainStep(const std::vector<int>& tokens, StepStats* stats, std::string* error) {
  const int numUnits = dims_.numUnits();
  const int micro = static_cast<int>(cfg_.microBatch);
  const int64_t accum = cfg_.gradAccum;
  const int ctx = dims_.ctx;
  const double globalTokens = static_cast<double>(cfg_.trainBatchSize) * ctx;
  const float dscale = static_cast<float>(lossScale_ / globalTokens);
  std::vector<int> in(static_cast<size_t>(micro) * ctx), tgt(in.size());
  double nll = 0.0;
  for (int64_t k = 0; k < accum; ++k) {
    // Global sequence index of this rank's rows: the same global batch whatever the number of ranks.
    for (int j = 0; j < micro; ++j) {
      const int64_t index = (k * world_ + rank_) * micro + j;
      sampleSequence(tokens, ctx, seed_, step_, index, in.data() + static_cast<size_t>(j) * ctx,
                     tgt.data() + static_cast<size_t>(j) * ctx);
    }
    model_.embedForward(acquire(0, +1), in.data());
    release(0);
    for (int l = 0; l < dims_.layers; ++l) {
      model_.blockForward(l, acquire(l + 1, +1));
      release(l + 1);
    }
    nll += model_.headForward(acquire(numUnits - 1, +1), tgt.data());
    // The head stays gathered: its backward comes next.
    for (int u = numUnits - 1; u >= 0; --u) {
      const float* p = acquire(u, -1);
      std::fill(computeGrads_.begin(), computeGrads_.end(), 0.f);
      if (u == numUnits - 1) {
        model_.headBackward(p, dscale, computeGrads_.data());
      } else if (u > 0) {
        model_.blockBackward(u - 1, p, computeGrads_.data());
      } else {
        model_.embedBackward(computeGrads_.data());
      }
      release(u);
      unitGradReady(u, static_cast<int>(k), computeGrads_.data());
    }
  }
  queue_->drain();
  // The loss: one double all-reduce of the per-rank NLL sums.
  double total = nll;
  ncclComm_t comm = queue_->comm();
  queue_->run([&] { return ncclAllReduce(&total, &total, 1, ncclFloat64, ncclSum, comm, nullptr); },
              "ncclAllReduce (loss)");
  stats->loss = total / globalTokens;
  const bool ok = optimizerStep(stats);
  queue_->takeTimes(&stats->commSeconds, &stats->waitSeconds);
  const std::string e = queue_->error();
  if (!e.empty()) {
    *error = e;
    return false;
  }
  ++step_;
  return ok;
}

void ZeroEngine::unitGradReady(int u, int micro, const float* g) {
  Unit& x = units_[static_cast<size_t>(u)];
  const bool lastMicro = micro == cfg_.gradAccum - 1;
  if (cfg_.stage < 2) {
    // Accumulate into the full gradient; it is reduced after the last micro-step.
    uint8_t* dst = x.grad->data();
    for (int64_t i = 0; i < x.size; ++i) storeAs(prec_, dst, i, loadAs(prec_, dst, i) + g[i]);
    if (!lastMicro) return;
  } else {
    Buffer b = makeBuffer(&ledger_, MemKind::kGradBuckets, static_cast<size_t>(x.padded) * width_);
    convertBuffer(prec_, b->data(), Precision::kFp32, reinterpret_cast<const uint8_t*>(g), x.size);
    pendingGrads_[static_cast<size_t>(u)] = std::move(b);
  }
  const Bucket& bucket = buckets_[static_cast<size_t>(bucketOf_[static_cast<size_t>(u)])];
  if (bucket.units.back() == u) reduceBucket(bucket, micro == 0);
}

void ZeroEngine::reduceBucket(const Bucket& b, bool firstMicro) {
  const Precision cp = cfg_.commPrecision;
  const size_t cw = static_cast<size_t>(precisionBytes(cp));
  const ncclDataType_t type = ncclTypeOf(cp);
  ncclComm_t comm = queue_->comm();
  if (cfg_.stage == 0) {
    Buffer send = makeBuffer(&ledger_, MemKind::kCommBuffers, static_cast<size_t>(b.elems) * cw);
    std::vector<int> units = b.units;
    queue_->submit(
        [this, send, units, cp, cw, type, comm] {
          int64_t off = 0;
          for (int u : units) {
            const Unit& x = units_[static_cast<size_t>(u)];
            convertBuffer(cp, send->data() + off * cw, prec_, x.grad->data(), x.size);
            off += x.size;
          }
          const ncclResult_t r =
              ncclAllReduce(send->data(), send->data(), static_cast<size_t>(off), type, ncclSum, comm, nullptr);
          off = 0;
          for (int u : units) {
            const Unit& x = units_[static_cast<size_t>(u)];
            convertBuffer(prec_, x.grad->data(), cp, send->data() + off * cw, x.size);
            off += x.size;
          }
          return r;
        },
        "ncclAllReduce (gradient bucket)");
    return;
  }
  // Stages 1-3: pack the bucket rank-major (rank q's slices of every unit together), reduce-scatter, and keep the
  // owned slices.
  int64_t sumShard = 0;
  std::vector<Buffer> sources;
  for (int u : b.units) {
    const Unit& x = units_[static_cast<size_t>(u)];
    sumShard += x.shard;
    sources.push_back(cfg_.stage < 2 ? x.grad : pendingGrads_[static_cast<size_t>(u)]);
    if (cfg_.stage >= 2) pendingGrads_[static_cast<size_t>(u)].reset();  // the task owns it now
  }
  Buffer send = makeBuffer(&ledger_, MemKind::kCommBuffers, static_cast<size_t>(sumShard * world_) * cw);
  Buffer recv = makeBuffer(&ledger_, MemKind::kCommBuffers, static_cast<size_t>(sumShard) * cw);
  std::vector<int> units = b.units;
  const int stage = cfg_.stage;
  queue_->submit(
      [this, send, recv, sources, units, sumShard, cp, cw, type, comm, stage, firstMicro]() mutable {
        for (int q = 0; q < world_; ++q) {
          int64_t off = static_cast<int64_t>(q) * sumShard;
          for (size_t i = 0; i < units.size(); ++i) {
            const Unit& x = units_[static_cast<size_t>(units[i])];
            convertBuffer(cp, send->data() + off * cw, prec_,
                          sources[i]->data() + static_cast<size_t>(q * x.shard) * static_cast<size_t>(width_), x.shard);
            off += x.shard;
          }
        }
        sources.clear();  // frees the stage 2/3 full gradients as soon as they are packed
        const ncclResult_t r =
            ncclReduceScatter(send->data(), recv->data(), static_cast<size_t>(sumShard), type, ncclSum, comm, nullptr);
        int64_t off = 0;
        for (int u : units) {
          Unit& x = units_[static_cast<size_t>(u)];
          if (stage == 1) {
            convertBuffer(prec_, x.grad->data() + static_cast<size_t>(x.begin) * width_, cp, recv->data() + off * cw,
                          x.shard);
          } else if (firstMicro) {
            convertBuffer(prec_, x.grad->data(), cp, recv->data() + off * cw, x.shard);
          } else {
            for (int64_t i = 0; i < x.shard; ++i) {
              storeAs(prec_, x.grad->data(), i, loadAs(prec_, x.grad->data(), i) + loadAs(cp, recv->data(), off + i));
            }
          }
          off += x.shard;
        }
        return r;
      },
      "ncclReduceScatter (gradient bucket)");
}

bool ZeroEngine::optimizerStep(StepStats* stats) {
  ncclComm_t comm = queue_->comm();
  const int numUnits = dims_.numUnits();
  const double invScale = 1.0 / lossScale_;
  stats->lossScale = lossScale_;
  // Overflow (fp16) and the gradient norm. Every stage sums squares over the same per-rank slices [begin,
  // begin+valid), so the norm, and the clipping, are bitwise the same across stages for a given world size.
  double sums[2] = {0.0, 0.0};  // squares, non-finite count
  for (int u = 0; u < numUnits; ++u) {
    const Unit& x = units_[static_cast<size_t>(u)];
    for (int64_t i = x.begin; i < x.begin + x.valid; ++i) {
      const double g = static_cast<double>(gradAt(u, i)) * invScale;
      if (!std::isfinite(g)) {
        sums[1] += 1.0;
      } else {
        sums[0] += g * g;
      }
    }
  }
  queue_->run([&] { return ncclAllReduce(sums, sums, 2, ncclFloat64, ncclSum, comm, nullptr); },
              "ncclAllReduce (gradient norm)");
  stats->gradNorm = std::sqrt(sums[0]);
  const bool overflow = sums[1] > 0.0;
  stats->skipped = overflow && prec_ == Precision::kFp16;
  if (stats->skipped) {
    if (cfg_.staticLossScale <= 0) {
      if (--hysteresisLeft_ <= 0) {
        lossScale_ = std::max(lossScale_ / 2.0, cfg_.minLossScale);
        hysteresisLeft_ = cfg_.hysteresis;
      }
      goodSteps_ = 0;
    }
  } else {
    const double clip = cfg_.gradientClipping > 0 && stats->gradNorm > cfg_.gradientClipping
                            ? cfg_.gradientClipping / (stats->gradNorm + 1e-6)
                            : 1.0;
    const float gscale = static_cast<float>(invScale * clip);
    ++adamT_;
    const float b1 = static_cast<float>(cfg_.beta1), b2 = static_cast<float>(cfg_.beta2);
    const float c1 = static_cast<float>(1.0 - std::pow(cfg_.beta1, static_cast<double>(adamT_)));
    const float c2 = static_cast<float>(1.0 - std::pow(cfg_.beta2, static_cast<double>(adamT_)));
    const float lr = static_cast<float>(cfg_.lr), eps = static_cast<float>(cfg_.eps);
    const float wd = static_cast<float>(cfg_.weightDecay);
    for (int u = 0; u < numUnits; ++u) {
      Unit& x = units_[static_cast<size_t>(u)];
      float* master = masterOf(u);
      float* m = x.m->floats();
      float* v = x.v->floats();
      uint8_t* working = x.param->data();
      const int64_t workingOffset = cfg_.stage < 3 ? x.optBegin : 0;
      for (int64_t j = 0; j < x.optCount; ++j) {
        const float g = gradAt(u, x.optBegin + j) * gscale;
        m[j] = b1 * m[j] + (1.f - b1) * g;
        v[j] = b2 * v[j] + (1.f - b2) * g * g;
        const float mhat = m[j] / c1, vhat = v[j] / c2;
        master[j] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * master[j]);
        storeAs(prec_, working, workingOffset + j, master[j]);
      }
    }
    if (prec_ == Precision::kFp16 && cfg_.staticLossScale <= 0 && ++goodSteps_ % cfg_.lossScaleWindow == 0) {
      lossScale_ *= 2.0;
    }
  }
  allGatherParams();
  for (Unit& x : units_) std::memset(x.grad->data(), 0, x.grad->size());
  return true;
}

void ZeroEngine::allGatherParams() {
  ncclComm_t comm = queue_->comm();
  const ncclDataType_t type = ncclTypeOf(prec_);
  const size_t w = static_cast<size_t>(width_);
  if (cfg_.stage == 3) {
    for (Unit& x : units_) {
      if (!x.persistent) continue;
      const void* send = x.param->data();
      void* recv = x.full->data();
      const size_t count = static_cast<size_t>(x.shard);
      queue_->run([=] { return ncclAllGather(send, recv, count, type, comm, nullptr); },
                  "ncclAllGather (persistent parameters)");
    }
    return;
  }
  if (cfg_.stage == 0) return;
  // Stages 1, 2: buckets of consecutive units up to allgather_bucket_size elements, packed like the reduce-scatter.
  const int numUnits = dims_.numUnits();
  int first = 0;
  while (first < numUnits) {
    int last = first;
    int64_t elems = units_[static_cast<size_t>(first)].size;
    while (last + 1 < numUnits && elems + units_[static_cast<size_t>(last) + 1].size <= cfg_.allgatherBucketSize) {
      ++last;
      elems += units_[static_cast<size_t>(last)].size;
    }
    int64_t sumShard = 0;
    for (int u = first; u <= last; ++u) sumShard += units_[static_cast<size_t>(u)].shard;
    Buffer send = makeBuffer(&ledger_, MemKind::kCommBuffers, static_cast<size_t>(sumShard) * w);
    Buffer recv = makeBuffer(&ledger_, MemKind::kCommBuffers, static_cast<size_t>(sumShard * world_) * w);
    int64_t off = 0;
    for (int u = first; u <= last; ++u) {
      const Unit& x = units_[static_cast<size_t>(u)];
      std::memcpy(send->data() + off * w, x.param->data() + static_cast<size_t>(x.begin) * w,
                  static_cast<size_t>(x.shard) * w);
      off += x.shard;
    }
    queue_->run(
        [&] { return ncclAllGather(send->data(), recv->data(), static_cast<size_t>(sumShard), type, comm, nullptr); },
        "ncclAllGather (parameters)");
    for (int q = 0; q < world_; ++q) {
      off = static_cast<int64_t>(q) * sumShard;
      for (int u = first; u <= last; ++u) {
        const Unit& x = units_[static_cast<size_t>(u)];
        std::memcpy(x.param->data() + static_cast<size_t>(q * x.shard) * w, recv->data() + off * w,
                    static_cast<size_t>(x.shard) * w);
        off += x.shard;
      }
    }
    first = last + 1;
  }
}

}  // namespace braid::trainer
