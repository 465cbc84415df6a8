// The calling thread's own scratch object, for the latency path's per-call storage (kept between calls, so a warm
// call allocates nothing).
#pragma once

namespace braid {

// The calling thread's T (built on first use, destroyed at thread exit), found with one TLS lookup per call. A
// function-local thread_local whose members are used several times can have its address derived again at each use:
// in a shared library each is a __tls_get_addr call (callgrind counted 11 per call in one latency-path function).
// Tag tells apart two users of the same T.
// The object itself needs a guard (its own TLS lookup) to be built on first use; a trivial pointer to it needs none,
// so a warm call costs one lookup.
template <class T, class Tag>
__attribute__((noinline)) T& threadScratchOwned() {
  thread_local T t;
  return t;
}

template <class T, class Tag>
__attribute__((noinline)) T& threadScratch() {
  thread_local T* mine = nullptr;
  if (__builtin_expect(mine == nullptr, 0)) mine = &threadScratchOwned<T, Tag>();
  return *mine;
}

}  // namespace braid
