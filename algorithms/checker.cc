#include "algorithms/checker.h"

#include "transports/transport.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

namespace braid {
namespace {

// The symbolic value of one element: which ranks contributed, which unit element it came from.
struct Val {
  uint64_t mask = 0;
  int64_t elem = -1;
  bool valid = false;
  bool post = false;
  bool dup = false;
  bool mixed = false;
};

Val combine(const Val& a, const Val& b) {
  Val r;
  r.valid = a.valid && b.valid;
  r.mask = a.mask | b.mask;
  r.dup = a.dup || b.dup || (a.mask & b.mask) != 0 || a.post || b.post;
  r.mixed = a.mixed || b.mixed || a.elem != b.elem;
  r.elem = a.elem;
  return r;
}

size_t inputSize(const CheckSpec& s) {
  const bool blocks = s.kind == CollKind::kReduceScatter || s.kind == CollKind::kAlltoAll;
  return blocks ? s.count * static_cast<size_t>(s.nranks) : s.count;
}
size_t outputSize(const CheckSpec& s) {
  const bool blocks = s.kind == CollKind::kAllGather || s.kind == CollKind::kAlltoAll;
  return blocks ? s.count * static_cast<size_t>(s.nranks) : s.count;
}

bool packed(StepOp op) {
  return op == StepOp::kSendPack || op == StepOp::kRecvPack;
}

struct RankState {
  std::vector<Val> input, output;
  size_t prog = 0;  // channel index
  size_t tile = 0;
  size_t step = 0;
};

// A packed step: the slot is the listed blocks back to back (sendPack gathers them, recvPack scatters it).
Status packedStep(const Program& p, const Step& s, RankState& st, int r, std::deque<std::vector<Val>>* in,
                  std::deque<std::vector<Val>>* out) {
  if (s.block < 0 || static_cast<size_t>(s.block) >= p.packs.size()) {
    return internalError("rank %d step %s names pack %d of %zu", r, stepOpName(s.op), s.block, p.packs.size());
  }
  const std::vector<PackEntry>& pack = p.packs[static_cast<size_t>(s.block)];
  std::vector<Val> data;
  if (in != nullptr) {
    data = std::move(in->front());
    in->pop_front();
  }
  size_t at = 0;
  for (const PackEntry& e : pack) {
    size_t off = 0, cnt = 0;
    p.blockRange(st.tile, e.block, e.buf, &off, &cnt);
    std::vector<Val>& buf = e.buf == 0 ? st.input : st.output;
    if (off + cnt > buf.size()) {
      return internalError("rank %d step %s touches %s [%zu,+%zu) beyond %zu", r, stepOpName(s.op),
                           e.buf == 0 ? "input" : "output", off, cnt, buf.size());
    }
    if (s.op == StepOp::kSendPack) {
      data.insert(data.end(), buf.begin() + static_cast<std::ptrdiff_t>(off),
                  buf.begin() + static_cast<std::ptrdiff_t>(off + cnt));
    } else {
      if (e.buf != 1) return internalError("rank %d: recvPack writes the input (block %d)", r, e.block);
      if (at + cnt > data.size()) {
        return internalError("rank %d step recvPack expects more elements than the slot's %zu", r, data.size());
      }
      std::copy(data.begin() + static_cast<std::ptrdiff_t>(at), data.begin() + static_cast<std::ptrdiff_t>(at + cnt),
                buf.begin() + static_cast<std::ptrdiff_t>(off));
    }
    at += cnt;
  }
  if (s.op == StepOp::kRecvPack && at != data.size()) {
    return internalError("rank %d step recvPack consumed %zu of the slot's %zu elements", r, at, data.size());
  }
  if (out != nullptr) out->push_back(std::move(data));
  return Status::ok();
}

}  // namespace

Status checkSchedule(const CheckSpec& spec) {
  const int n = spec.nranks;
  if (static_cast<int>(spec.programs.size()) != n) return internalError("expected programs for %d ranks", n);
  std::vector<RankState> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    RankState& st = ranks[static_cast<size_t>(r)];
    st.input.resize(inputSize(spec));
    for (size_t i = 0; i < st.input.size(); ++i) {
      st.input[i] = Val{1ull << r, static_cast<int64_t>(i), true, false, false, false};
    }
    st.output.resize(outputSize(spec));
  }
  // FIFO per (channel, src, dst).
  std::map<std::tuple<size_t, int, int>, std::deque<std::vector<Val>>> fifos;

  auto finished = [&](int r) {
    const RankState& st = ranks[static_cast<size_t>(r)];
    return st.prog >= spec.programs[static_cast<size_t>(r)].size();
  };
  // Skips programs with no tiles or no steps.
  auto normalize = [&](int r) {
    RankState& st = ranks[static_cast<size_t>(r)];
    const auto& progs = spec.programs[static_cast<size_t>(r)];
    while (st.prog < progs.size()) {
      const Program& p = progs[st.prog];
      if (st.step >= p.steps.size()) {
        st.step = 0;
        ++st.tile;
      }
      if (st.tile < p.numTiles() && !p.steps.empty()) return;
      st.tile = 0;
      st.step = 0;
      ++st.prog;
    }
  };

  for (int r = 0; r < n; ++r) normalize(r);
  while (true) {
    bool progress = false;
    bool allDone = true;
    for (int r = 0; r < n; ++r) {
      if (finished(r)) continue;
      allDone = false;
      RankState& st = ranks[static_cast<size_t>(r)];
      const Program& p = spec.programs[static_cast<size_t>(r)][st.prog];
      const Step& s = p.steps[st.step];
      std::deque<std::vector<Val>>* in = nullptr;
      std::deque<std::vector<Val>>* out = nullptr;
      if (stepRecvs(s.op)) {
        in = &fifos[{st.prog, s.recvPeer, r}];
        if (in->empty()) continue;
      }
      if (stepSends(s.op)) {
        out = &fifos[{st.prog, r, s.sendPeer}];
        if (out->size() >= static_cast<size_t>(kFifoSlots)) continue;
      }
      if (packed(s.op)) {
        Status ps = packedStep(p, s, st, r, in, out);
        if (!ps.isOk()) return ps;
        ++st.step;
        normalize(r);
        progress = true;
        continue;
      }
      size_t inOff = 0, outOff = 0, cnt = 0, cnt2 = 0;
      p.blockRange(st.tile, s.block, 0, &inOff, &cnt);
      p.blockRange(st.tile, s.block, 1, &outOff, &cnt2);
      if (cnt != cnt2) return internalError("rank %d: input/output block sizes differ", r);
      if (stepReadsInput(s.op) && inOff + cnt > st.input.size()) {
        return internalError("rank %d step %s reads input [%zu,+%zu) beyond %zu", r, stepOpName(s.op), inOff, cnt,
                             st.input.size());
      }
      if (stepWritesOutput(s.op) && outOff + cnt > st.output.size()) {
        return internalError("rank %d step %s writes output [%zu,+%zu) beyond %zu", r, stepOpName(s.op), outOff, cnt,
                             st.output.size());
      }
      std::vector<Val> data(cnt);
      if (in != nullptr) {
        if (in->front().size() != cnt) {
          return internalError("rank %d step %s expects %zu elements, slot from rank %d has %zu", r, stepOpName(s.op),
                               cnt, s.recvPeer, in->front().size());
        }
        data = std::move(in->front());
        in->pop_front();
      }
      for (size_t i = 0; i < cnt; ++i) {
        if (stepAccumulates(s.op)) {
          data[i] = combine(data[i], st.output[outOff + i]);
        } else if (stepReduces(s.op)) {
          data[i] = combine(data[i], st.input[inOff + i]);
        } else if (stepReadsInput(s.op)) {
          data[i] = st.input[inOff + i];
        } else if (s.op == StepOp::kSendFromOutput) {
          data[i] = st.output[outOff + i];
        }
        if (stepIsFinal(s.op)) {
          if (data[i].post) data[i].dup = true;
          data[i].post = true;
        }
        if (stepWritesOutput(s.op)) st.output[outOff + i] = data[i];
      }
      if (out != nullptr) out->push_back(std::move(data));
      ++st.step;
      normalize(r);
      progress = true;
    }
    if (allDone) break;
    if (!progress) {
      std::string where;
      for (int r = 0; r < n; ++r) {
        if (finished(r)) continue;
        const RankState& st = ranks[static_cast<size_t>(r)];
        const Step& s = spec.programs[static_cast<size_t>(r)][st.prog].steps[st.step];
        where += strPrintf(" rank %d at channel %zu tile %zu step %s;", r, st.prog, st.tile, stepOpName(s.op));
      }
      return internalError("deadlock:%s", where.c_str());
    }
  }
  for (const auto& f : fifos) {
    if (!f.second.empty()) {
      return internalError("%zu slots from rank %d to rank %d were never received", f.second.size(),
                           std::get<1>(f.first), std::get<2>(f.first));
    }
  }

  const uint64_t all = n >= 64 ? ~0ull : (1ull << n) - 1;
  const bool isReduction =
      spec.kind == CollKind::kAllReduce || spec.kind == CollKind::kReduce || spec.kind == CollKind::kReduceScatter;
  for (int r = 0; r < n; ++r) {
    const RankState& st = ranks[static_cast<size_t>(r)];
    if (spec.kind == CollKind::kReduce && r != spec.root) continue;
    for (size_t i = 0; i < st.output.size(); ++i) {
      Val want{};
      want.valid = true;
      switch (spec.kind) {
        case CollKind::kAllReduce:
        case CollKind::kReduce:
          want.mask = all;
          want.elem = static_cast<int64_t>(i);
          break;
        case CollKind::kBroadcast:
          want.mask = 1ull << spec.root;
          want.elem = static_cast<int64_t>(i);
          break;
        case CollKind::kAllGather:
          want.mask = 1ull << (i / spec.count);
          want.elem = static_cast<int64_t>(i % spec.count);
          break;
        case CollKind::kReduceScatter:
          want.mask = all;
          want.elem = static_cast<int64_t>(static_cast<size_t>(r) * spec.count + i);
          break;
        case CollKind::kAlltoAll:
          // Output block p holds rank p's input block r.
          want.mask = 1ull << (i / spec.count);
          want.elem = static_cast<int64_t>(static_cast<size_t>(r) * spec.count + i % spec.count);
          break;
        default:
          return internalError("checker: unsupported collective");
      }
      const Val& got = st.output[i];
      bool ok = got.valid && got.mask == want.mask && got.elem == want.elem && !got.dup && !got.mixed &&
                (!isReduction || got.post || n == 1 ? true : false);
      if (isReduction && !got.post) ok = false;
      if (!ok) {
        return internalError(
            "%s n=%d count=%zu: rank %d output[%zu] has mask 0x%llx elem %lld%s%s%s%s, expected mask 0x%llx elem %lld",
            collKindName(spec.kind), n, spec.count, r, i, (unsigned long long)got.mask, (long long)got.elem,
            got.valid ? "" : " (never written)", got.dup ? " (duplicate contribution or post-op)" : "",
            got.mixed ? " (mixed elements)" : "", isReduction && !got.post ? " (post-op missing)" : "",
            (unsigned long long)want.mask, (long long)want.elem);
      }
    }
  }
  return Status::ok();
}

}  // namespace braid
