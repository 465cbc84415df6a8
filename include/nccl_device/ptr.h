/* braid's nccl_device/ptr.h: ncclSymPtr<T>, an address in a window that means the same place on every rank.
 *
 * A symmetric pointer is (window, byte offset): arithmetic moves the offset in units of T on host and device; in
 * device code it turns into this rank's address (localPtr), an LSA member's (lsaPtr), a world rank's or a team
 * member's (peerPtr; null outside this rank's LSA team), or a multicast address (multimemPtr, lsaMultimemPtr; null
 * where the window has no multicast mapping). A null window gives null pointers' arithmetic only. */
#ifndef NCCL_DEVICE_PTR_H_
#define NCCL_DEVICE_PTR_H_

#include "core.h"

#ifdef __cplusplus
namespace nccl_braid_sym_ {
/* Bytes a step of ncclSymPtr<T> moves: sizeof(T), and 1 for void (byte steps). */
template <typename T>
struct ElemBytes {
  static constexpr long long value = static_cast<long long>(sizeof(T));
};
template <>
struct ElemBytes<void> {
  static constexpr long long value = 1;
};
template <>
struct ElemBytes<const void> {
  static constexpr long long value = 1;
};
}  // namespace nccl_braid_sym_

template <typename T>
struct ncclSymPtr {
  using ElementType = T;
  ncclWindow_t window;
  size_t offset;

  NCCL_HOST_DEVICE_INLINE constexpr ncclSymPtr(ncclWindow_t w = nullptr, size_t off = 0) : window(w), offset(off) {}

  /* The same place seen as another element type. */
  template <typename U>
  NCCL_HOST_DEVICE_INLINE operator ncclSymPtr<U>() const {
    return ncclSymPtr<U>(window, offset);
  }

  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr<T>& operator+=(Int d) {
    offset = static_cast<size_t>(static_cast<long long>(offset) + static_cast<long long>(d) * elemBytes());
    return *this;
  }
  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr<T>& operator-=(Int d) {
    offset = static_cast<size_t>(static_cast<long long>(offset) - static_cast<long long>(d) * elemBytes());
    return *this;
  }

#if NCCL_DEVICE_HALF_
  NCCL_DEVICE_INLINE T* localPtr() const {
    return static_cast<T*>(ncclGetLocalPointer(window, offset));
  }
  NCCL_DEVICE_INLINE T* lsaPtr(int peer) const {
    return static_cast<T*>(ncclGetLsaPointer(window, offset, peer));
  }
  NCCL_DEVICE_INLINE T* peerPtr(int peer) const {
    return static_cast<T*>(ncclGetPeerPointer(window, offset, peer));
  }
  NCCL_DEVICE_INLINE T* peerPtr(ncclTeam team, int peer) const {
    return static_cast<T*>(ncclGetPeerPointer(window, offset, team, peer));
  }
  NCCL_DEVICE_INLINE T* multimemPtr(ncclMultimemHandle mm) const {
    return static_cast<T*>(ncclGetMultimemPointer(window, offset, mm));
  }
  NCCL_DEVICE_INLINE T* lsaMultimemPtr(ncclDevComm const& comm) const {
    return static_cast<T*>(ncclGetLsaMultimemPointer(window, offset, comm));
  }
#endif

 private:
  NCCL_HOST_DEVICE_INLINE static constexpr long long elemBytes() {
    return nccl_braid_sym_::ElemBytes<T>::value;
  }
};

template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator+(ncclSymPtr<T> p, Int d) {
  return p += d;
}
template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator-(ncclSymPtr<T> p, Int d) {
  return p -= d;
}
/* Elements between two symmetric pointers into one window. */
template <typename T>
NCCL_HOST_DEVICE_INLINE ptrdiff_t operator-(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return static_cast<ptrdiff_t>(static_cast<long long>(a.offset) - static_cast<long long>(b.offset)) /
         static_cast<ptrdiff_t>(nccl_braid_sym_::ElemBytes<T>::value);
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator==(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return a.window == b.window && a.offset == b.offset;
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator!=(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return !(a == b);
}

#if NCCL_DEVICE_HALF_
/* A resource buffer of the device communicator as a symmetric pointer. */
NCCL_DEVICE_INLINE ncclSymPtr<char> ncclGetResourceBuffer(ncclDevComm const& comm, ncclDevResourceHandle h) {
  return ncclSymPtr<char>(comm.resourceWindow, ncclGetResourceBufferOffset(h));
}
#endif
#endif /* __cplusplus */

#endif /* NCCL_DEVICE_PTR_H_ */
