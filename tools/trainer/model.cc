#include "tools/trainer/model.h"

#include <algorithm>
#include <cmath>

namespace braid::trainer {

namespace {

// Offsets of the tensors inside a block unit (C = channels).
struct BlockLayout {
  int64_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, size;
  explicit BlockLayout(int64_t c) {
    int64_t o = 0;
    auto take = [&](int64_t n) {
      const int64_t at = o;
      o += n;
      return at;
    };
    ln1w = take(c);
    ln1b = take(c);
    qkvw = take(3 * c * c);
    qkvb = take(3 * c);
    projw = take(c * c);
    projb = take(c);
    ln2w = take(c);
    ln2b = take(c);
    fcw = take(4 * c * c);
    fcb = take(4 * c);
    fcprojw = take(4 * c * c);
    fcprojb = take(c);
    size = o;
  }
};

constexpr float kLnEps = 1e-5f;

// SplitMix64: a stateless, seedable generator, so every rank draws the same initial weights.
uint64_t splitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float normal(uint64_t* s) {
  const double u1 = (static_cast<double>(splitMix(s) >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = static_cast<double>(splitMix(s) >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

void layerNormForward(float* out, float* mean, float* rstd, const float* in, const float* w, const float* b, int n,
                      int c) {
  for (int i = 0; i < n; ++i) {
    const float* x = in + static_cast<int64_t>(i) * c;
    float m = 0.f;
    for (int k = 0; k < c; ++k) m += x[k];
    m /= static_cast<float>(c);
    float v = 0.f;
    for (int k = 0; k < c; ++k) v += (x[k] - m) * (x[k] - m);
    v /= static_cast<float>(c);
    const float s = 1.f / std::sqrt(v + kLnEps);
    float* o = out + static_cast<int64_t>(i) * c;
    for (int k = 0; k < c; ++k) o[k] = (x[k] - m) * s * w[k] + b[k];
    mean[i] = m;
    rstd[i] = s;
  }
}

void layerNormBackward(float* din, float* dw, float* db, const float* dout, const float* in, const float* w,
                       const float* mean, const float* rstd, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const float* x = in + static_cast<int64_t>(i) * c;
    const float* dy = dout + static_cast<int64_t>(i) * c;
    float* dx = din + static_cast<int64_t>(i) * c;
    float dnormMean = 0.f, dnormNormMean = 0.f;
    for (int k = 0; k < c; ++k) {
      const float norm = (x[k] - mean[i]) * rstd[i];
      const float dnorm = dy[k] * w[k];
      dnormMean += dnorm;
      dnormNormMean += dnorm * norm;
    }
    dnormMean /= static_cast<float>(c);
    dnormNormMean /= static_cast<float>(c);
    for (int k = 0; k < c; ++k) {
      const float norm = (x[k] - mean[i]) * rstd[i];
      const float dnorm = dy[k] * w[k];
      db[k] += dy[k];
      dw[k] += dy[k] * norm;
      dx[k] += rstd[i] * (dnorm - dnormMean - norm * dnormNormMean);
    }
  }
}

// out[n, oc] = in[n, c] . w[oc, c]^T + b[oc]. w is first transposed into `wt` so that the inner loop runs over
// outputs (an axpy the compiler vectorises) while each output still sums b + x[0]w[0] + x[1]w[1] + ... in order.
void matmulForward(float* out, const float* in, const float* w, const float* b, int n, int c, int oc, float* wt) {
  for (int o = 0; o < oc; ++o) {
    for (int k = 0; k < c; ++k) wt[static_cast<int64_t>(k) * oc + o] = w[static_cast<int64_t>(o) * c + k];
  }
  for (int i = 0; i < n; ++i) {
    const float* x = in + static_cast<int64_t>(i) * c;
    float* y = out + static_cast<int64_t>(i) * oc;
    for (int o = 0; o < oc; ++o) y[o] = b != nullptr ? b[o] : 0.f;
    for (int k = 0; k < c; ++k) {
      const float xk = x[k];
      const float* wr = wt + static_cast<int64_t>(k) * oc;
      for (int o = 0; o < oc; ++o) y[o] += xk * wr[o];
    }
  }
}

// din += dout . w; dw += dout^T . in; db += sum dout.
void matmulBackward(float* din, float* dw, float* db, const float* dout, const float* in, const float* w, int n, int c,
                    int oc) {
  for (int i = 0; i < n; ++i) {
    const float* dy = dout + static_cast<int64_t>(i) * oc;
    const float* x = in + static_cast<int64_t>(i) * c;
    float* dx = din + static_cast<int64_t>(i) * c;
    for (int o = 0; o < oc; ++o) {
      const float g = dy[o];
      const float* wr = w + static_cast<int64_t>(o) * c;
      float* dwr = dw + static_cast<int64_t>(o) * c;
      for (int k = 0; k < c; ++k) {
        dx[k] += g * wr[k];
        dwr[k] += g * x[k];
      }
      if (db != nullptr) db[o] += g;
    }
  }
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

void geluForward(float* out, float* tanhOut, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float t = std::tanh(kGeluScale * (x + 0.044715f * x * x * x));
    tanhOut[i] = t;  // kept for the backward pass
    out[i] = 0.5f * x * (1.f + t);
  }
}

void geluBackward(float* din, const float* in, const float* tanhIn, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float t = tanhIn[i];
    const float sech2 = 1.f - t * t;
    const float du = kGeluScale * (1.f + 3.f * 0.044715f * x * x);
    din[i] += dout[i] * (0.5f * (1.f + t) + 0.5f * x * sech2 * du);
  }
}

}  // namespace

int64_t ModelDims::unitSize(int unit) const {
  const int64_t c = channels;
  if (unit == 0) return static_cast<int64_t>(vocab) * c + static_cast<int64_t>(ctx) * c;
  if (unit <= layers) return BlockLayout(c).size;
  return 2 * c + static_cast<int64_t>(vocab) * c + vocab;
}

int64_t ModelDims::totalParams() const {
  int64_t n = 0;
  for (int u = 0; u < numUnits(); ++u) n += unitSize(u);
  return n;
}

void initParams(const ModelDims& d, uint64_t seed, std::vector<float>* params) {
  params->assign(static_cast<size_t>(d.totalParams()), 0.f);
  uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
  float* p = params->data();
  const int64_t c = d.channels;
  auto fill = [&](float* at, int64_t n, float stddev) {
    for (int64_t i = 0; i < n; ++i) at[i] = stddev * normal(&s);
  };
  fill(p, d.unitSize(0), 0.02f);
  p += d.unitSize(0);
  const BlockLayout bl(c);
  const float projStd = 0.02f / std::sqrt(2.f * static_cast<float>(d.layers));
  for (int l = 0; l < d.layers; ++l) {
    std::fill(p + bl.ln1w, p + bl.ln1w + c, 1.f);
    std::fill(p + bl.ln2w, p + bl.ln2w + c, 1.f);
    fill(p + bl.qkvw, 3 * c * c, 0.02f);
    fill(p + bl.projw, c * c, projStd);
    fill(p + bl.fcw, 4 * c * c, 0.02f);
    fill(p + bl.fcprojw, 4 * c * c, projStd);
    p += bl.size;
  }
  std::fill(p, p + c, 1.f);  // final layer norm weight; bias and output bias stay 0
  fill(p + 2 * c, static_cast<int64_t>(d.vocab) * c, 0.02f);
}

Model::Model(const ModelDims& dims, int batch) : d_(dims), b_(batch) {
  const size_t bt = static_cast<size_t>(b_) * static_cast<size_t>(d_.ctx);
  const size_t c = static_cast<size_t>(d_.channels);
  tokens_.resize(bt);
  targets_.resize(bt);
  x_.assign(static_cast<size_t>(d_.layers) + 1, std::vector<float>(bt * c));
  acts_.resize(static_cast<size_t>(d_.layers));
  for (BlockActs& a : acts_) {
    a.ln1.resize(bt * c);
    a.ln1Mean.resize(bt);
    a.ln1Rstd.resize(bt);
    a.qkv.resize(bt * 3 * c);
    a.att.resize(static_cast<size_t>(b_) * d_.heads * d_.ctx * d_.ctx);
    a.atty.resize(bt * c);
    a.res1.resize(bt * c);
    a.ln2.resize(bt * c);
    a.ln2Mean.resize(bt);
    a.ln2Rstd.resize(bt);
    a.fch.resize(bt * 4 * c);
    a.fchGelu.resize(bt * 4 * c);
    a.fchTanh.resize(bt * 4 * c);
  }
  lnf_.resize(bt * c);
  lnfMean_.resize(bt);
  lnfRstd_.resize(bt);
  probs_.resize(bt * static_cast<size_t>(d_.vocab));
  dx_.resize(bt * c);
  dtmp_.resize(bt * c);
  dbig_.resize(bt * 4 * c);
  dqkv_.resize(bt * 3 * c);
  datt_.resize(static_cast<size_t>(d_.ctx));
  datty_.resize(bt * c);
  wt_.resize(static_cast<size_t>(4) * c * std::max<size_t>(c, static_cast<size_t>(d_.vocab)));
}

void Model::embedForward(const float* p, const int* tokens) {
  const int c = d_.channels;
  const float* wte = p;
  const float* wpe = p + static_cast<int64_t>(d_.vocab) * c;
  std::copy(tokens, tokens + tokens_.size(), tokens_.begin());
  float* x = x_[0].data();
  for (int b = 0; b < b_; ++b) {
    for (int t = 0; t < d_.ctx; ++t) {
      const int64_t bt = static_cast<int64_t>(b) * d_.ctx + t;
      const float* e = wte + static_cast<int64_t>(tokens[bt]) * c;
      const float* q = wpe + static_cast<int64_t>(t) * c;
      for (int k = 0; k < c; ++k) x[bt * c + k] = e[k] + q[k];
    }
  }
}

void Model::blockForward(int layer, const float* p) {
  const int c = d_.channels, n = b_ * d_.ctx, T = d_.ctx, H = d_.heads, hs = c / H;
  const BlockLayout bl(c);
  BlockActs& a = acts_[static_cast<size_t>(layer)];
  const float* in = x_[static_cast<size_t>(layer)].data();
  float* out = x_[static_cast<size_t>(layer) + 1].data();
  layerNormForward(a.ln1.data(), a.ln1Mean.data(), a.ln1Rstd.data(), in, p + bl.ln1w, p + bl.ln1b, n, c);
  matmulForward(a.qkv.data(), a.ln1.data(), p + bl.qkvw, p + bl.qkvb, n, c, 3 * c, wt_.data());
  const float scale = 1.f / std::sqrt(static_cast<float>(hs));
  std::fill(a.atty.begin(), a.atty.end(), 0.f);
  for (int b = 0; b < b_; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        const float* q = a.qkv.data() + (static_cast<int64_t>(b) * T + t) * 3 * c + h * hs;
        float* att = a.att.data() + ((static_cast<int64_t>(b) * H + h) * T + t) * T;
        float mx = -1e30f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* k = a.qkv.data() + (static_cast<int64_t>(b) * T + t2) * 3 * c + c + h * hs;
          float s = 0.f;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          att[t2] = s * scale;
          mx = std::max(mx, att[t2]);
        }
        float sum = 0.f;
        for (int t2 = 0; t2 <= t; ++t2) {
          att[t2] = std::exp(att[t2] - mx);
          sum += att[t2];
        }
        for (int t2 = 0; t2 <= t; ++t2) att[t2] /= sum;
        for (int t2 = t + 1; t2 < T; ++t2) att[t2] = 0.f;
        float* y = a.atty.data() + (static_cast<int64_t>(b) * T + t) * c + h * hs;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = a.qkv.data() + (static_cast<int64_t>(b) * T + t2) * 3 * c + 2 * c + h * hs;
          for (int i = 0; i < hs; ++i) y[i] += att[t2] * v[i];
        }
      }
    }
  }
  matmulForward(a.res1.data(), a.atty.data(), p + bl.projw, p + bl.projb, n, c, c, wt_.data());
  for (int64_t i = 0; i < static_cast<int64_t>(n) * c; ++i) a.res1[i] += in[i];
  layerNormForward(a.ln2.data(), a.ln2Mean.data(), a.ln2Rstd.data(), a.res1.data(), p + bl.ln2w, p + bl.ln2b, n, c);
  matmulForward(a.fch.data(), a.ln2.data(), p + bl.fcw, p + bl.fcb, n, c, 4 * c, wt_.data());
  geluForward(a.fchGelu.data(), a.fchTanh.data(), a.fch.data(), static_cast<int64_t>(n) * 4 * c);
  matmulForward(out, a.fchGelu.data(), p + bl.fcprojw, p + bl.fcprojb, n, 4 * c, c, wt_.data());
  for (int64_t i = 0; i < static_cast<int64_t>(n) * c; ++i) out[i] += a.res1[i];
}

double Model::headForward(const float* p, const int* targets) {
  const int c = d_.channels, n = b_ * d_.ctx, V = d_.vocab;
  std::copy(targets, targets + targets_.size(), targets_.begin());
  layerNormForward(lnf_.data(), lnfMean_.data(), lnfRstd_.data(), x_.back().data(), p, p + c, n, c);
  const float* w = p + 2 * c;
  const float* bias = w + static_cast<int64_t>(V) * c;
  matmulForward(probs_.data(), lnf_.data(), w, bias, n, c, V, wt_.data());
  double nll = 0.0;
  for (int i = 0; i < n; ++i) {
    float* row = probs_.data() + static_cast<int64_t>(i) * V;
    float mx = row[0];
    for (int v = 1; v < V; ++v) mx = std::max(mx, row[v]);
    float sum = 0.f;
    for (int v = 0; v < V; ++v) {
      row[v] = std::exp(row[v] - mx);
      sum += row[v];
    }
    for (int v = 0; v < V; ++v) row[v] /= sum;
    nll -= std::log(static_cast<double>(row[targets[i]]));
  }
  return nll;
}

void Model::headBackward(const float* p, float dscale, float* g) {
  const int c = d_.channels, n = b_ * d_.ctx, V = d_.vocab;
  // dlogits = (probs - onehot) * dscale, reusing probs_ (the forward is not needed again).
  for (int i = 0; i < n; ++i) {
    float* row = probs_.data() + static_cast<int64_t>(i) * V;
    row[targets_[static_cast<size_t>(i)]] -= 1.f;
    for (int v = 0; v < V; ++v) row[v] *= dscale;
  }
  std::fill(dtmp_.begin(), dtmp_.end(), 0.f);
  const float* w = p + 2 * c;
  float* gw = g + 2 * c;
  matmulBackward(dtmp_.data(), gw, gw + static_cast<int64_t>(V) * c, probs_.data(), lnf_.data(), w, n, c, V);
  std::fill(dx_.begin(), dx_.end(), 0.f);
  layerNormBackward(dx_.data(), g, g + c, dtmp_.data(), x_.back().data(), p, lnfMean_.data(), lnfRstd_.data(), n, c);
}

void Model::blockBackward(int layer, const float* p, float* g) {
  const int c = d_.channels, n = b_ * d_.ctx, T = d_.ctx, H = d_.heads, hs = c / H;
  const BlockLayout bl(c);
  BlockActs& a = acts_[static_cast<size_t>(layer)];
  const float* in = x_[static_cast<size_t>(layer)].data();
  // dx_ holds d(out). out = res1 + mlp(ln2(res1)): d(res1) starts as a copy of d(out).
  std::copy(dx_.begin(), dx_.end(), dtmp_.begin());  // dtmp_ = d(res1)
  std::fill(dbig_.begin(), dbig_.end(), 0.f);
  // d(fchGelu) -> dbig_
  matmulBackward(dbig_.data(), g + bl.fcprojw, g + bl.fcprojb, dx_.data(), a.fchGelu.data(), p + bl.fcprojw, n, 4 * c,
                 c);
  // d(fch): gelu backward in place into a fresh buffer; reuse a.fchGelu storage (forward is done with it).
  std::fill(a.fchGelu.begin(), a.fchGelu.end(), 0.f);
  geluBackward(a.fchGelu.data(), a.fch.data(), a.fchTanh.data(), dbig_.data(), static_cast<int64_t>(n) * 4 * c);
  std::fill(datty_.begin(), datty_.end(), 0.f);  // d(ln2)
  matmulBackward(datty_.data(), g + bl.fcw, g + bl.fcb, a.fchGelu.data(), a.ln2.data(), p + bl.fcw, n, c, 4 * c);
  layerNormBackward(dtmp_.data(), g + bl.ln2w, g + bl.ln2b, datty_.data(), a.res1.data(), p + bl.ln2w, a.ln2Mean.data(),
                    a.ln2Rstd.data(), n, c);
  // res1 = in + proj(atty): d(in) starts as d(res1).
  std::copy(dtmp_.begin(), dtmp_.end(), dx_.begin());
  std::fill(datty_.begin(), datty_.end(), 0.f);
  matmulBackward(datty_.data(), g + bl.projw, g + bl.projb, dtmp_.data(), a.atty.data(), p + bl.projw, n, c, c);
  // Attention backward into dqkv_.
  std::fill(dqkv_.begin(), dqkv_.end(), 0.f);
  const float scale = 1.f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < b_; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        const int64_t row = static_cast<int64_t>(b) * T + t;
        const float* att = a.att.data() + ((static_cast<int64_t>(b) * H + h) * T + t) * T;
        const float* dy = datty_.data() + row * c + h * hs;
        const float* q = a.qkv.data() + row * 3 * c + h * hs;
        float* dq = dqkv_.data() + row * 3 * c + h * hs;
        float dot = 0.f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const int64_t r2 = static_cast<int64_t>(b) * T + t2;
          const float* v = a.qkv.data() + r2 * 3 * c + 2 * c + h * hs;
          float* dv = dqkv_.data() + r2 * 3 * c + 2 * c + h * hs;
          float s = 0.f;
          for (int i = 0; i < hs; ++i) {
            s += dy[i] * v[i];
            dv[i] += att[t2] * dy[i];
          }
          datt_[static_cast<size_t>(t2)] = s;
          dot += att[t2] * s;
        }
        for (int t2 = 0; t2 <= t; ++t2) {
          const int64_t r2 = static_cast<int64_t>(b) * T + t2;
          const float dpre = att[t2] * (datt_[static_cast<size_t>(t2)] - dot) * scale;
          const float* k = a.qkv.data() + r2 * 3 * c + c + h * hs;
          float* dk = dqkv_.data() + r2 * 3 * c + c + h * hs;
          for (int i = 0; i < hs; ++i) {
            dq[i] += dpre * k[i];
            dk[i] += dpre * q[i];
          }
        }
      }
    }
  }
  std::fill(datty_.begin(), datty_.end(), 0.f);  // d(ln1)
  matmulBackward(datty_.data(), g + bl.qkvw, g + bl.qkvb, dqkv_.data(), a.ln1.data(), p + bl.qkvw, n, c, 3 * c);
  layerNormBackward(dx_.data(), g + bl.ln1w, g + bl.ln1b, datty_.data(), in, p + bl.ln1w, a.ln1Mean.data(),
                    a.ln1Rstd.data(), n, c);
}

void Model::embedBackward(float* g) {
  const int c = d_.channels;
  float* gwte = g;
  float* gwpe = g + static_cast<int64_t>(d_.vocab) * c;
  for (int b = 0; b < b_; ++b) {
    for (int t = 0; t < d_.ctx; ++t) {
      const int64_t bt = static_cast<int64_t>(b) * d_.ctx + t;
      const float* dx = dx_.data() + bt * c;
      float* e = gwte + static_cast<int64_t>(tokens_[static_cast<size_t>(bt)]) * c;
      float* q = gwpe + static_cast<int64_t>(t) * c;
      for (int k = 0; k < c; ++k) {
        e[k] += dx[k];
        q[k] += dx[k];
      }
    }
  }
}

}  // namespace braid::trainer
