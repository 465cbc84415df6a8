// The windows of a CUDA communicator that have a multicast mapping of their own (cuda_windows.h), as the direct
// kernel's symmetric rounds look them up: for an operation whose send and receive buffers lie in such windows, at
// the same offsets on every rank, the switch reads every rank's send buffer and writes every rank's receive buffer
// in place (direct_kernel.h, DirectOpDesc::symKey).
//
// A window's serial counts the multicast bindings of the communicator; windows are registered collectively, in the
// same order on every rank, and a binding succeeds on every rank or on none, so equal serials name the same window
// everywhere.
//
// Thread safety: every method may be called from any thread (registration from the user's, lookups from the
// communicator's launches).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace braid {

class WindowMcTable {
 public:
  struct Hit {
    char* mc = nullptr;  // this process's multicast address of the looked-up pointer
    uint64_t key = 0;    // the window's serial and the pointer's offset in it, exactly; the same on every rank
  };

  // A window [base, base + boundBytes) bound behind multicast mapping `mc`; returns its serial.
  uint64_t add(const char* base, size_t boundBytes, char* mc) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t serial = ++serials_;
    windows_[base] = Entry{boundBytes, mc, serial};
    return serial;
  }
  // Window `serial` goes (a later window at the same base, which replaced its entry, stays).
  void remove(const char* base, uint64_t serial) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = windows_.find(base);
    if (it != windows_.end() && it->second.serial == serial) windows_.erase(it);
  }
  // [p, p + bytes) inside one window's bound range: its multicast address and key; false otherwise, and for
  // serials or offsets the key cannot hold exactly (2^20 bindings, 16 TiB).
  bool find(const char* p, size_t bytes, Hit* out) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = windows_.upper_bound(p);
    if (it == windows_.begin()) return false;
    --it;
    const size_t off = static_cast<size_t>(p - it->first);
    if (off > it->second.bytes || bytes > it->second.bytes - off) return false;
    if (it->second.serial >= (uint64_t{1} << 20) || off >= (size_t{1} << 44)) return false;
    out->mc = it->second.mc + off;
    out->key = (it->second.serial << 44) | off;
    return true;
  }

 private:
  struct Entry {
    size_t bytes;
    char* mc;
    uint64_t serial;
  };
  mutable std::mutex mu_;
  std::map<const char*, Entry> windows_;
  uint64_t serials_ = 0;
};

}  // namespace braid
