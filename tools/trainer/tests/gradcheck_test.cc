// Finite-difference check of the hand-written backward pass: for a tiny model, the analytic gradient of the summed
// NLL must match central differences on sampled coordinates of every unit. Float32 central differences carry about
// 1e-3 relative noise at this step size, hence the tolerance.
#include <cmath>
#include <cstdio>
#include <vector>

#include "tools/trainer/corpus.h"
#include "tools/trainer/model.h"

using braid::trainer::Model;
using braid::trainer::ModelDims;

namespace {

double lossAt(Model& m, const ModelDims& d, std::vector<float>& params, const std::vector<int>& in,
              const std::vector<int>& tgt) {
  std::vector<const float*> unit;
  const float* p = params.data();
  for (int u = 0; u < d.numUnits(); ++u) {
    unit.push_back(p);
    p += d.unitSize(u);
  }
  m.embedForward(unit[0], in.data());
  for (int l = 0; l < d.layers; ++l) m.blockForward(l, unit[static_cast<size_t>(l) + 1]);
  return m.headForward(unit.back(), tgt.data());
}

}  // namespace

int main() {
  ModelDims d;
  d.vocab = braid::trainer::alphabetSize();
  d.ctx = 8;
  d.channels = 16;
  d.layers = 2;
  d.heads = 2;
  const int batch = 2;
  std::vector<float> params;
  braid::trainer::initParams(d, 7, &params);
  // Larger weights than GPT-2's init, so every path carries a gradient well above the finite-difference noise.
  for (float& x : params) x *= 2.f;
  const std::string text = braid::trainer::generateCorpus(4096, 3);
  std::vector<int> tokens, in(static_cast<size_t>(batch * d.ctx)), tgt(in.size());
  std::string error;
  if (!braid::trainer::tokenize(text, &tokens, &error)) {
    std::fprintf(stderr, "tokenize: %s\n", error.c_str());
    return 1;
  }
  for (int b = 0; b < batch; ++b) {
    braid::trainer::sampleSequence(tokens, d.ctx, 1, 0, b, in.data() + b * d.ctx, tgt.data() + b * d.ctx);
  }
  Model m(d, batch);
  std::vector<float> grad(params.size(), 0.f);
  lossAt(m, d, params, in, tgt);
  {
    std::vector<float*> g;
    std::vector<const float*> p;
    size_t off = 0;
    for (int u = 0; u < d.numUnits(); ++u) {
      g.push_back(grad.data() + off);
      p.push_back(params.data() + off);
      off += static_cast<size_t>(d.unitSize(u));
    }
    m.headBackward(p.back(), 1.f, g.back());
    for (int l = d.layers - 1; l >= 0; --l)
      m.blockBackward(l, p[static_cast<size_t>(l) + 1], g[static_cast<size_t>(l) + 1]);
    m.embedBackward(g[0]);
  }
  int failures = 0, checked = 0;
  const float h = 5e-3f;
  size_t off = 0;
  for (int u = 0; u < d.numUnits(); ++u) {
    const size_t n = static_cast<size_t>(d.unitSize(u));
    double worst = 0.0;
    // Every 7th coordinate plus the unit's first and last: all tensors of the unit are visited.
    for (size_t i = 0; i < n; i += (i + 7 < n ? 7 : (n - 1 - i > 0 ? n - 1 - i : 1))) {
      float& x = params[off + i];
      const float saved = x;
      x = saved + h;
      const double lp = lossAt(m, d, params, in, tgt);
      x = saved - h;
      const double lm = lossAt(m, d, params, in, tgt);
      x = saved;
      const double numeric = (lp - lm) / (2.0 * h);
      const double analytic = grad[off + i];
      const double err = std::fabs(numeric - analytic) / std::fmax(2e-2, std::fabs(numeric) + std::fabs(analytic));
      worst = std::fmax(worst, err);
      ++checked;
      if (err > 3e-2) {
        if (failures < 20) {
          std::fprintf(stderr, "unit %d coordinate %zu: analytic %.6g numeric %.6g\n", u, i, analytic, numeric);
        }
        ++failures;
      }
    }
    std::printf("unit %d: %zu params, worst relative error %.3g\n", u, n, worst);
    off += n;
  }
  std::printf("%d of %d coordinates outside tolerance\n", failures, checked);
  return failures == 0 ? 0 : 1;
}
