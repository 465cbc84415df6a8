// The CPU backend's CTA and data movement for the host+device engines (src/backends/common): the calling thread
// alone, whose barriers are nothing, and the SIMD reduction loops of reduce.h. With them the step engine and the
// direct tile reduction run exactly the sequence of a plain loop.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "src/backends/cpu/reduce.h"

namespace braid {

struct HostCta {
  static constexpr bool kSerial = true;
  int tid() const { return 0; }
  int nthreads() const { return 1; }
  void sync() const {}
  bool syncAll(bool v) const { return v; }
};

struct HostDataOps {
  // The step engine computes a step's result into the send slot and then copies it to the output, so an output
  // written with non-temporal stores is never read back (step_engine.h).
  static constexpr bool kComputeIntoSlot = true;
  // A waiting step lets the next tile's independent steps run (step_engine.h's runAhead): one thread otherwise
  // idles in lock step with its peer.
  static constexpr bool kRunAhead = true;
  // A step that reduces into both destinations runs 8 KB at a time (step_engine.h): each piece goes to the output
  // while it is in L1, and those stores overlap the next piece's reads, where a whole step reads, then writes.
  static constexpr size_t kTwoDestinationPieceBytes = size_t{8} << 10;
  // Writes to the operation's output bypass the caches (reduce.h's streaming forms): set for large operations
  // by the executor, which fences before it reports them done.
  bool streamOutputs = false;

  void reduce(const HostCta&, const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post,
              bool toOutput = false) {
    if (streaming(toOutput, dst, peer, local)) return reduceIntoStreaming(op, dst, peer, local, n, post, tile());
    reduceInto(op, dst, peer, local, n, post);
  }
  void copyLocal(const HostCta&, const ReduceOp& op, void* dst, const void* src, size_t n, bool post,
                 bool toOutput = false) {
    if (streaming(toOutput, dst, src, src)) return copyLocalStreaming(op, dst, src, n, post, tile());
    braid::copyLocal(op, dst, src, n, post);
  }
  void reduceMany(const HostCta&, const ReduceOp* ops, void* dst, const char* const* srcs, size_t at, int nsrc,
                  size_t n, bool post) {
    braid::reduceMany(ops, dst, srcs, at, nsrc, n, post);
  }
  void copy(const HostCta&, void* dst, const void* src, size_t bytes, bool toOutput = false) {
    if (dst == src || bytes == 0) return;
    if (streaming(toOutput, dst, src, src)) return streamCopy(dst, src, bytes);
    stripedCopy(dst, src, bytes);
  }

 private:
  // In place the destination lines were just read, so they are cached and ordinary stores are cheaper.
  bool streaming(bool toOutput, const void* dst, const void* a, const void* b) const {
    return toOutput && streamOutputs && dst != a && dst != b;
  }
  void* tile() {
    if (tile_.empty()) tile_.resize(kStreamTileBytes);  // once per launch, and only for large ones
    return tile_.data();
  }
  std::vector<unsigned char> tile_;
};

}  // namespace braid
