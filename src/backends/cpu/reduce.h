// Host reduction kernels: the element-wise combining functions the CPU backend's primitives run.
//
// An operation is pre -> combine -> post:
//   pre(x)     = x * scalar for kPreMulSum, identity otherwise;
//   combine    = + for kSum/kAvg/kPreMulSum, * for kProd, max/min for kMax/kMin;
//   post(x)    = x / nranks for kAvg (integers: C truncating division; floats: a correctly rounded division of the
//                already rounded sum), identity otherwise.
// Integers wrap on overflow. Narrow floats (half, bf16, fp8) are widened to float, combined, and rounded back to
// nearest-even after every step (pre, combine and post each round), which mirrors per-hop rounding in a pipeline.
// kMax/kMin on floats follow fmax/fmin: a NaN operand is ignored unless both are NaN.
//
// Buffers: any alignment (memcpy-based access); n may be 0; dst may be exactly the same buffer as peer and/or local
// (src for the copies) but must not partially overlap them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/common/coll_types.h"
#include "src/common/dtype.h"

namespace braid {

// dst[i] = peer[i] (op) pre(local[i]); if post, dst[i] = post(dst[i]).
void reduceInto(const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post);

// dst[i] = pre(src[i]); if post, dst[i] = post(dst[i]). Used when a rank's own input enters the pipeline.
void copyLocal(const ReduceOp& op, void* dst, const void* src, size_t n, bool post);

// dst[i] = post(src[i]), or a plain copy when post is false or the op has no post-op.
void copyPost(const ReduceOp& op, void* dst, const void* src, size_t n, bool post);

// dst[i] = post(pre_0(src_0[i]) (op) pre_1(src_1[i]) (op) ... (op) pre_{nsrc-1}(src_{nsrc-1}[i])), src_p = srcs[p] + at
// bytes, in rank order. ops[p] is source p's op (PreMulSum: its scalar; the pre-multiplication rounds in the type).
// Unlike a chain of reduceInto, narrow floats accumulate sums and products in float and round once at the end, as
// NCCL's symmetric kernels do (an average rounds that sum, then divides: what the multicast path can do); other
// types and max/min give the chain's bits. The same semantics as
// reduce_copy.h's ctaReduceMany (the direct path's tile reduction on the host and on GPUs). dst may be exactly the
// first source's range and must not overlap another.
void reduceMany(const ReduceOp* ops, void* dst, const char* const* srcs, size_t at, int nsrc, size_t n, bool post);

// Operations on at least kStripeMinBytes per operand read them as several interleaved streams (reduce.cc says
// why), with the same bits: reduceInto, copyLocal and copyPost on integers, float and double, and max/min on the
// narrow floats (their other operators run block loops bound by the conversions), and stripedCopy below
// kStripeMaxCopyBytes. Not the streaming forms below, which work a 16 KB tile at a time. From
// kStripeMaxCopyBytes a copy goes to glibc's memmove, whose own large-copy path writes around the caches (from a
// threshold glibc computes from the cache size: 19.9 MB on the 48 MB-L3 VM, `ld.so --list-tunables`), as copies
// far larger than the caches should; the ring's copies are at most a slot (512 KB).
constexpr size_t kStripeMinBytes = size_t{256} << 10;
constexpr size_t kStripeMaxCopyBytes = size_t{16} << 20;

// memmove for the host kernels, striped between the two bounds above. dst and src may be the same or overlap;
// either may be null when bytes is 0.
void stripedCopy(void* dst, const void* src, size_t bytes);

// Destinations of operations at least this large are written with non-temporal stores: they are far larger than
// the caches, and ordinary stores would first read every destination line (measured: a 128 MB out-of-place
// all-reduce between 2 processes took 1.8x the in-place time, whose destinations were just read).
constexpr size_t kStreamingStoreBytes = size_t{1} << 20;

// memcpy that bypasses the caches where the platform allows (x86-64: movntdq); any alignment and size. The stores
// are weakly ordered: streamFence() before anything publishes them to another thread.
void streamCopy(void* dst, const void* src, size_t bytes);
void streamFence();

// reduceInto / copyLocal writing dst with non-temporal stores: each piece is computed in `tile` (the caller's,
// kStreamTileBytes: it stays in L1), then streamed out. dst must not alias peer, local or src (callers take the
// plain functions in place).
constexpr size_t kStreamTileBytes = size_t{16} << 10;
void reduceIntoStreaming(const ReduceOp& op, void* dst, const void* peer, const void* local, size_t n, bool post,
                         void* tile);
void copyLocalStreaming(const ReduceOp& op, void* dst, const void* src, size_t n, bool post, void* tile);

}  // namespace braid
