// BRAID_HOST_DEVICE: marks small inline helpers (dtype conversions, reduction element functions) that are shared
// between host code and CUDA device code. Expands to __host__ __device__ when compiled by nvcc (or clang in CUDA
// mode) and to nothing in plain C++ translation units.
// BRAID_FORCE_INLINE: for per-element helpers called from hot loops, where GCC's heuristics would otherwise emit an
// out-of-line call per element once a loop body calls them several times.
#pragma once

#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif

#if defined(__CUDA_ARCH__)
#define BRAID_FORCE_INLINE __forceinline__
#elif defined(__GNUC__)
#define BRAID_FORCE_INLINE inline __attribute__((always_inline))
#else
#define BRAID_FORCE_INLINE inline
#endif
