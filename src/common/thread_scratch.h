// The calling thread's own scratch object, for the latency path's per-call storage (kept between calls, so a warm
// call allocates nothing).
#pragma once

namespace braid {

// The object itself; threadScratch below finds it. Its guard (for building it on first use) is a TLS lookup of its
// own.
template <class T, class Tag>
__attribute__((noinline)) T& threadScratchOwned() {
  thread_local T t;
  return t;
}

// The calling thread's T (built on first use, destroyed at thread exit), found with one TLS lookup per call: a
// trivial pointer to it needs no guard. A function-local thread_local whose members are used several times can have
// its address derived again at each use: in a shared library each is a __tls_get_addr call (callgrind counted 11 per
// call in one latency-path function). Tag tells apart two users of the same T. Not for thread-exit destructors: the
// object may be gone by then.
template <class T, class Tag>
__attribute__((noinline)) T& threadScratch() {
  thread_local T* mine = nullptr;
  if (__builtin_expect(mine == nullptr, 0)) mine = &threadScratchOwned<T, Tag>();
  return *mine;
}

}  // namespace braid
