// Sharded checkpoints. Each rank writes dir/rank<r>-of-<N>.ckpt holding, for every unit, its owned slice
// [r*S, r*S + valid) of the fp32 master weights, Adam m and Adam v, plus the step, Adam's step count and the fp16
// loss-scaler state. The format does not depend on the stage (a stage 0 rank writes only its slice), so a
// checkpoint of any stage and any N loads into any stage and any M: each rank reads, from every file, the part of
// each unit that overlaps the range its optimizer owns (everything at stage 0), then rebuilds its working params.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "tools/trainer/engine.h"
#include "tools/trainer/precision.h"

namespace braid::trainer {

namespace {

constexpr char kMagic[8] = {'B', 'R', 'A', 'I', 'D', 'C', 'K', '1'};

struct Header {
  char magic[8];
  int32_t version, nranks, rank, numUnits;
  int32_t vocab, ctx, channels, layers, heads, reserved;
  int64_t step, adamT, goodSteps;
  double lossScale;
  int64_t hysteresisLeft;
};

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

std::string shardPath(const std::string& dir, int rank, int nranks) {
  return dir + "/rank" + std::to_string(rank) + "-of-" + std::to_string(nranks) + ".ckpt";
}

int64_t sliceValid(int64_t size, int nranks, int rank) {
  const int64_t shard = (size + nranks - 1) / nranks;
  const int64_t begin = shard * rank;
  return std::max<int64_t>(0, std::min(shard, size - begin));
}

bool readHeader(FILE* f, const std::string& path, Header* h, std::vector<int64_t>* sizes, std::string* error) {
  if (std::fread(h, sizeof(*h), 1, f) != 1 || std::memcmp(h->magic, kMagic, sizeof(kMagic)) != 0 || h->version != 1 ||
      h->numUnits <= 0 || h->numUnits > 1 << 20) {
    *error = "checkpoint '" + path + "' is not a braid-train checkpoint (bad header)";
    return false;
  }
  sizes->resize(static_cast<size_t>(h->numUnits));
  if (std::fread(sizes->data(), sizeof(int64_t), sizes->size(), f) != sizes->size()) {
    *error = "checkpoint '" + path + "' is truncated";
    return false;
  }
  return true;
}

}  // namespace

bool ZeroEngine::save(const std::string& dir, std::string* error) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    *error = "cannot create checkpoint directory '" + dir + "': " + std::strerror(errno);
    return false;
  }
  const std::string path = shardPath(dir, rank_, world_);
  const std::string tmp = path + ".tmp";
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) {
    *error = "cannot write checkpoint '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = 1;
  h.nranks = world_;
  h.rank = rank_;
  h.numUnits = dims_.numUnits();
  h.vocab = dims_.vocab;
  h.ctx = dims_.ctx;
  h.channels = dims_.channels;
  h.layers = dims_.layers;
  h.heads = dims_.heads;
  h.step = step_;
  h.adamT = adamT_;
  h.goodSteps = goodSteps_;
  h.lossScale = lossScale_;
  h.hysteresisLeft = hysteresisLeft_;
  bool ok = std::fwrite(&h, sizeof(h), 1, f.get()) == 1;
  for (const Unit& x : units_) ok = ok && std::fwrite(&x.size, sizeof(int64_t), 1, f.get()) == 1;
  for (int u = 0; u < dims_.numUnits() && ok; ++u) {
    Unit& x = units_[static_cast<size_t>(u)];
    const int64_t at = x.begin - x.optBegin;  // where the owned slice starts in the optimizer arrays
    const float* arrays[3] = {masterOf(u) + at, x.m->floats() + at, x.v->floats() + at};
    for (const float* a : arrays) {
      ok = ok && std::fwrite(a, sizeof(float), static_cast<size_t>(x.valid), f.get()) == static_cast<size_t>(x.valid);
    }
  }
  ok = ok && std::fflush(f.get()) == 0;
  f.reset();
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "writing checkpoint '" + path + "' failed: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool ZeroEngine::load(const std::string& dir, std::string* error) {
  // The writer's rank count: the file of rank 0 names it.
  int fileRanks = 0;
  for (int n = 1; n <= 4096 && fileRanks == 0; ++n) {
    struct stat st;
    if (::stat(shardPath(dir, 0, n).c_str(), &st) == 0) fileRanks = n;
  }
  if (fileRanks == 0) {
    *error = "no checkpoint in '" + dir + "' (expected files rank<r>-of-<N>.ckpt)";
    return false;
  }
  std::vector<int64_t> covered(units_.size(), 0);
  Header first{};
  for (int q = 0; q < fileRanks; ++q) {
    const std::string path = shardPath(dir, q, fileRanks);
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) {
      *error = "cannot read checkpoint shard '" + path + "': " + std::strerror(errno);
      return false;
    }
    Header h{};
    std::vector<int64_t> sizes;
    if (!readHeader(f.get(), path, &h, &sizes, error)) return false;
    if (h.nranks != fileRanks || h.rank != q || h.vocab != dims_.vocab || h.ctx != dims_.ctx ||
        h.channels != dims_.channels || h.layers != dims_.layers || h.heads != dims_.heads ||
        h.numUnits != dims_.numUnits()) {
      *error = "checkpoint '" + path + "' was written for a different model or run (vocab " + std::to_string(h.vocab) +
               ", ctx " + std::to_string(h.ctx) + ", channels " + std::to_string(h.channels) + ", layers " +
               std::to_string(h.layers) + ", heads " + std::to_string(h.heads) + ", rank " + std::to_string(h.rank) +
               " of " + std::to_string(h.nranks) + "); this run has vocab " + std::to_string(dims_.vocab) + ", ctx " +
               std::to_string(dims_.ctx) + ", channels " + std::to_string(dims_.channels) + ", layers " +
               std::to_string(dims_.layers) + ", heads " + std::to_string(dims_.heads);
      return false;
    }
    if (q == 0) first = h;
    long offset = static_cast<long>(sizeof(Header) + sizes.size() * sizeof(int64_t));
    for (int u = 0; u < dims_.numUnits(); ++u) {
      Unit& x = units_[static_cast<size_t>(u)];
      const int64_t fileShard = (x.size + fileRanks - 1) / fileRanks;
      const int64_t fileBegin = fileShard * q;
      const int64_t fileValid = sliceValid(x.size, fileRanks, q);
      const int64_t lo = std::max(fileBegin, x.optBegin);
      const int64_t hi = std::min(fileBegin + fileValid, x.optBegin + x.optCount);
      if (lo < hi) {
        float* arrays[3] = {masterOf(u), x.m->floats(), x.v->floats()};
        for (int a = 0; a < 3; ++a) {
          const long at = offset + static_cast<long>((a * fileValid + (lo - fileBegin)) * 4);
          const size_t n = static_cast<size_t>(hi - lo);
          if (std::fseek(f.get(), at, SEEK_SET) != 0 ||
              std::fread(arrays[a] + (lo - x.optBegin), sizeof(float), n, f.get()) != n) {
            *error = "checkpoint '" + path + "' is truncated";
            return false;
          }
        }
        covered[static_cast<size_t>(u)] += hi - lo;
      }
      offset += static_cast<long>(3 * fileValid * 4);
    }
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    if (covered[u] != units_[u].optCount) {
      *error = "checkpoint in '" + dir + "' does not cover unit " + std::to_string(u);
      return false;
    }
  }
  step_ = first.step;
  adamT_ = first.adamT;
  goodSteps_ = first.goodSteps;
  lossScale_ = first.lossScale;
  hysteresisLeft_ = static_cast<int>(first.hysteresisLeft);
  // Working params from the master copy, then the stage's gather.
  for (int u = 0; u < dims_.numUnits(); ++u) {
    Unit& x = units_[static_cast<size_t>(u)];
    const float* master = masterOf(u);
    const int64_t workingOffset = cfg_.stage < 3 ? x.optBegin : 0;
    for (int64_t j = 0; j < x.optCount; ++j) storeAs(prec_, x.param->data(), workingOffset + j, master[j]);
  }
  allGatherParams();
  const std::string e = queue_->error();
  if (!e.empty()) {
    *error = e;
    return false;
  }
  return true;
}

}  // namespace braid::trainer
