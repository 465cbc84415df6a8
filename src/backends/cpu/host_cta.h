// The CPU backend's CTA and data movement for the host+device engines (src/backends/common): the calling thread
// alone, whose barriers are nothing, and the SIMD reduction loops of reduce.h. With them the step engine and the
// direct tile reduction run exactly the sequence of a plain loop.
#pragma once

#include <cstddef>
#include <cstring>

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
  void reduce(const HostCta&, const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post) {
    reduceInto(op, dst, peer, local, n, post);
  }
  void copyLocal(const HostCta&, const ReduceOp& op, void* dst, const void* src, size_t n, bool post) {
    braid::copyLocal(op, dst, src, n, post);
  }
  void copy(const HostCta&, void* dst, const void* src, size_t bytes) {
    if (dst != src && bytes != 0) memcpy(dst, src, bytes);
  }
};

}  // namespace braid
