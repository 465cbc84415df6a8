// A small decoder-only transformer (GPT-2 layout, char-level, untied output head) with a hand-written fp32 forward
// and backward on the CPU. The parameters are split into "units", the granularity at which the ZeRO engine shards,
// gathers and reduces them (FSDP's flat parameters): unit 0 is the embedding, units 1..L the blocks, unit L+1 the
// final layer norm and output head. The model never owns parameters: each call gets the unit's flat fp32 array.
#pragma once

#include <cstdint>
#include <vector>

namespace braid::trainer {

struct ModelDims {
  int vocab = 0;
  int ctx = 0;       // T: tokens per sequence
  int channels = 0;  // C
  int layers = 0;    // L
  int heads = 0;     // H; C % H == 0

  int numUnits() const { return layers + 2; }
  int64_t unitSize(int unit) const;
  int64_t totalParams() const;
};

// Fills `params` (totalParams(), units in order) with GPT-2's initialisation from `seed`; the same on every rank.
void initParams(const ModelDims& d, uint64_t seed, std::vector<float>* params);

// Forward and backward for micro-batches of `batch` sequences; holds the activations between the two.
class Model {
 public:
  Model(const ModelDims& dims, int batch);

  const ModelDims& dims() const { return d_; }
  int batch() const { return b_; }

  // Forward, unit by unit. tokens and targets hold batch x ctx ids.
  void embedForward(const float* p, const int* tokens);
  void blockForward(int layer, const float* p);  // layer in [0, L)
  // Returns the summed negative log-likelihood of the targets.
  double headForward(const float* p, const int* targets);

  // Backward in reverse unit order. dscale is d(objective)/d(each token's NLL). Gradients are added to `g`.
  void headBackward(const float* p, float dscale, float* g);
  void blockBackward(int layer, const float* p, float* g);
  void embedBackward(float* g);

 private:
  struct BlockActs {
    std::vector<float> ln1, ln1Mean, ln1Rstd, qkv, att, atty, res1, ln2, ln2Mean, ln2Rstd, fch, fchGelu, fchTanh;
  };

  ModelDims d_;
  int b_;
  std::vector<int> tokens_, targets_;
  std::vector<std::vector<float>> x_;  // residual stream entering each block, plus the output of the last
  std::vector<BlockActs> acts_;
  std::vector<float> lnf_, lnfMean_, lnfRstd_, probs_;
  std::vector<float> dx_, dtmp_, dbig_, dqkv_, datt_, datty_;
  std::vector<float> wt_;  // a transposed weight matrix (matmul forward scratch)
};

}  // namespace braid::trainer
