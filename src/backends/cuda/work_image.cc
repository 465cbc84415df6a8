#include "src/backends/cuda/work_image.h"

#include <cstring>
#include <type_traits>

namespace braid {
namespace {

constexpr size_t kAlign = 16;

size_t roundUp(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Bump allocation in the image (or, with a null base, only the sizes).
struct Cursor {
  char* base;
  size_t used = 0;
  template <typename T>
  T* take(size_t n) {
    T* p = base != nullptr ? reinterpret_cast<T*>(base + used) : nullptr;
    used += roundUp(n * sizeof(T));
    return p;
  }
};

template <typename T>
T* copyArray(Cursor& c, const T* src, size_t n) {
  T* dst = c.take<T>(n);
  if (dst != nullptr && n != 0) memcpy(static_cast<void*>(dst), src, n * sizeof(T));
  return dst;
}

// src points into [from, from + n); the same element in the copy at `to`.
template <typename T>
const T* moved(const T* src, const T* from, const T* to) {
  return src == nullptr ? nullptr : to + (src - from);
}

size_t layout(const std::vector<const ChannelWork*>& channels, char* dst,
              const std::function<FifoCursor*(void*)>* cursorFor, KernelArgs* args) {
  std::vector<const ChannelWork*> used;
  for (const ChannelWork* cw : channels) {
    if (!cw->descs.empty()) used.push_back(cw);
  }
  Cursor c{dst};
  ChannelWorkDesc* chans = c.take<ChannelWorkDesc>(used.size());
  for (size_t k = 0; k < used.size(); ++k) {
    const ChannelWork& cw = *used[k];
    const size_t n = cw.descs.size();
    WorkDesc* descs = copyArray(c, cw.descs.data(), n);
    ItemState* states = c.take<ItemState>(n);
    ConnSlot* conns = copyArray(c, cw.conns.data(), cw.conns.size());
    const int32_t* connIdx = copyArray(c, cw.connIdx.data(), cw.connIdx.size());
    const uint32_t* blockers = copyArray(c, cw.blockers.data(), cw.blockers.size());
    const uint32_t* packOffsets = copyArray(c, cw.packOffsets.data(), cw.packOffsets.size());
    const PackEntry* packEntries = copyArray(c, cw.packEntries.data(), cw.packEntries.size());
    std::vector<const Step*> steps(n);
    for (size_t i = 0; i < n; ++i) steps[i] = copyArray(c, cw.descs[i].prog.steps, cw.descs[i].prog.nsteps);
    if (dst == nullptr) continue;
    for (size_t i = 0; i < n; ++i) {
      const WorkDesc& from = cw.descs[i];
      WorkDesc& d = descs[i];
      d.prog.steps = steps[i];
      d.prog.packOffsets = moved(from.prog.packOffsets, cw.packOffsets.data(), packOffsets);
      d.prog.packEntries = moved(from.prog.packEntries, cw.packEntries.data(), packEntries);
      d.sendConn = moved(from.sendConn, cw.connIdx.data(), connIdx);
      d.recvConn = moved(from.recvConn, cw.connIdx.data(), connIdx);
      d.blockers = moved(from.blockers, cw.blockers.data(), blockers);
      states[i] = ItemState{};
    }
    for (size_t j = 0; j < cw.conns.size(); ++j) conns[j].cursor = (*cursorFor)(cw.conns[j].owner);
    ChannelWorkDesc& ch = chans[k];
    ch = ChannelWorkDesc{};
    ch.items = descs;
    ch.states = states;
    ch.nitems = static_cast<uint32_t>(n);
    ch.remaining = static_cast<uint32_t>(n);
    ch.conns = conns;
    ch.nconns = static_cast<uint32_t>(cw.conns.size());
  }
  if (args != nullptr) {
    args->channels = chans;
    args->nchannels = static_cast<uint32_t>(used.size());
  }
  return c.used;
}

}  // namespace

size_t workImageBytes(const std::vector<const ChannelWork*>& channels) {
  return layout(channels, nullptr, nullptr, nullptr);
}

KernelArgs writeWorkImage(const std::vector<const ChannelWork*>& channels, char* dst, char* at,
                          const std::function<FifoCursor*(void* owner)>& cursorFor) {
  KernelArgs args;
  layout(channels, dst, &cursorFor, &args);
  if (at == dst) return args;
  // Every pointer into the block moves by the same offset; the walk reads the block through its own (host) pointers
  // before rewriting each one.
  auto to = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    return p == nullptr ? p : reinterpret_cast<T*>(at + (reinterpret_cast<const char*>(p) - dst));
  };
  for (uint32_t k = 0; k < args.nchannels; ++k) {
    ChannelWorkDesc& ch = args.channels[k];
    for (uint32_t i = 0; i < ch.nitems; ++i) {
      WorkDesc& d = const_cast<WorkDesc&>(ch.items[i]);
      d.prog.steps = to(d.prog.steps);
      d.prog.packOffsets = to(d.prog.packOffsets);
      d.prog.packEntries = to(d.prog.packEntries);
      d.sendConn = to(d.sendConn);
      d.recvConn = to(d.recvConn);
      d.blockers = to(d.blockers);
    }
    ch.items = to(ch.items);
    ch.states = to(ch.states);
    ch.conns = to(ch.conns);
  }
  args.channels = to(args.channels);
  return args;
}

}  // namespace braid
