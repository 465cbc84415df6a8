#include "algorithms/checker.h"

#include "src/backends/common/fifo.h"

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
};

// A packed step: the slot is the listed blocks back to back (sendPack gathers them, recvPack scatters it).
Status packedStep(const Program& p, const Step& s, RankState& st, size_t tile, int r, std::deque<std::vector<Val>>* in,
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
    p.blockRange(tile, e.block, e.buf, &off, &cnt);
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
  // A FIFO per (channel, lane, src, dst). Programs run concurrently, as the executor runs its work items: those of
  // one rank and channel that share a connector run in order (a later one waits until the earlier is done).
  using FifoKey = std::tuple<int, int, int, int>;
  std::map<FifoKey, std::deque<std::vector<Val>>> fifos;
  struct ItemState {
    size_t tile = 0, step = 0;
    bool done = false;
    std::vector<size_t> blockers;
  };
  std::vector<std::vector<ItemState>> items(static_cast<size_t>(n));
  auto channelOf = [&](int r, size_t i) {
    return spec.channels.empty() ? static_cast<int>(i) : spec.channels[static_cast<size_t>(r)][i];
  };
  // Skips finished tiles and programs with no tiles or no steps.
  auto normalize = [&](const Program& p, ItemState& it) {
    if (it.step >= p.steps.size()) {
      it.step = 0;
      ++it.tile;
    }
    if (it.tile >= p.numTiles() || p.steps.empty()) it.done = true;
  };
  for (int r = 0; r < n; ++r) {
    const auto& progs = spec.programs[static_cast<size_t>(r)];
    if (!spec.channels.empty() && spec.channels[static_cast<size_t>(r)].size() != progs.size()) {
      return internalError("rank %d: %zu programs but %zu channel entries", r, progs.size(),
                           spec.channels[static_cast<size_t>(r)].size());
    }
    auto& its = items[static_cast<size_t>(r)];
    its.resize(progs.size());
    for (size_t i = 0; i < progs.size(); ++i) {
      normalize(progs[i], its[i]);
      for (size_t j = 0; j < i; ++j) {
        if (channelOf(r, i) != channelOf(r, j) || progs[i].lane != progs[j].lane) continue;
        bool shares = false;
        for (const Step& a : progs[i].steps) {
          for (const Step& b : progs[j].steps) {
            shares |= (a.sendPeer >= 0 && a.sendPeer == b.sendPeer) || (a.recvPeer >= 0 && a.recvPeer == b.recvPeer);
          }
        }
        if (shares) its[i].blockers.push_back(j);
      }
    }
  }

  while (true) {
    bool progress = false;
    bool allDone = true;
    for (int r = 0; r < n; ++r) {
      RankState& st = ranks[static_cast<size_t>(r)];
      auto& its = items[static_cast<size_t>(r)];
      for (size_t item = 0; item < its.size(); ++item) {
        ItemState& it = its[item];
        if (it.done) continue;
        allDone = false;
        bool blocked = false;
        for (size_t b : it.blockers) blocked |= !its[b].done;
        if (blocked) continue;
        const Program& p = spec.programs[static_cast<size_t>(r)][item];
        const int ch = channelOf(r, item);
        const Step& s = p.steps[it.step];
        std::deque<std::vector<Val>>* in = nullptr;
        std::deque<std::vector<Val>>* out = nullptr;
        if (stepRecvs(s.op)) {
          in = &fifos[FifoKey{ch, p.lane, s.recvPeer, r}];
          if (in->empty()) continue;
        }
        if (stepSends(s.op)) {
          out = &fifos[FifoKey{ch, p.lane, r, s.sendPeer}];
          if (out->size() >= static_cast<size_t>(kFifoSlots)) continue;
        }
        if (packed(s.op)) {
          Status ps = packedStep(p, s, st, it.tile, r, in, out);
          if (!ps.isOk()) return ps;
          ++it.step;
          normalize(p, it);
          progress = true;
          continue;
        }
        size_t inOff = 0, outOff = 0, cnt = 0, cnt2 = 0;
        p.blockRange(it.tile, s.block, 0, &inOff, &cnt);
        p.blockRange(it.tile, s.block, 1, &outOff, &cnt2);
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
        ++it.step;
        normalize(p, it);
        progress = true;
      }
    }
    if (allDone) break;
    if (!progress) {
      std::string where;
      for (int r = 0; r < n; ++r) {
        const auto& its = items[static_cast<size_t>(r)];
        for (size_t item = 0; item < its.size(); ++item) {
          if (its[item].done) continue;
          const Step& s = spec.programs[static_cast<size_t>(r)][item].steps[its[item].step];
          where += strPrintf(" rank %d at program %zu tile %zu step %s;", r, item, its[item].tile, stepOpName(s.op));
        }
      }
      return internalError("deadlock:%s", where.c_str());
    }
  }
  for (const auto& f : fifos) {
    if (!f.second.empty()) {
      return internalError("%zu slots from rank %d to rank %d (channel %d lane %d) were never received",
                           f.second.size(), std::get<2>(f.first), std::get<3>(f.first), std::get<0>(f.first),
                           std::get<1>(f.first));
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
