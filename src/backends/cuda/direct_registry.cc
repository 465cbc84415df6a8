#include "src/backends/cuda/direct_registry.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "src/common/logging.h"

namespace braid {
namespace {

// A service request: map registration `id` of rank `owner` (`bytes` in all, the descriptors sent with it, one per
// mapping, whose sizes follow the request as encodeSegments writes them), or unmap it.
enum class Ask : uint32_t { kMap = 1, kUnmap = 2 };
struct Request {
  Ask ask;
  int32_t owner;
  uint64_t id;
  uint64_t bytes;
};

std::string encode(const Request& r) {
  return std::string(reinterpret_cast<const char*>(&r), sizeof(r));
}

// Unmapping never waits long for a peer: one that does not answer soon is gone or stuck, and keeps its mapping.
constexpr double kUnmapWaitSec = 5;

}  // namespace

DirectRegistry::DirectRegistry(const CuApi* api, const CudaDeviceMemory* memory, int rank, double timeoutSec)
    : api_(api), memory_(memory), rank_(rank), timeoutSec_(timeoutSec) {}

DirectRegistry::~DirectRegistry() {
  if (serving_) stopFdService(service_);  // no mapping starts after this
  std::map<const void*, Mine> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine.swap(mine_);
  }
  for (const auto& m : mine) {
    for (int q : m.second.imported) unmapAt(q, m.second.id);
  }
  std::lock_guard<std::mutex> lock(importsMu_);
  imports_.clear();
}

Result<FdTicket> DirectRegistry::startService() {
  BRAID_ASSIGN_OR_RETURN(service_, serveFdService([this](const std::vector<int>& fds, const std::string& request) {
                           return serve(fds, request);
                         }));
  serving_ = true;
  return service_;
}

Result<std::string> DirectRegistry::serve(const std::vector<int>& fds, const std::string& request) {
  Request r{};
  if (request.size() < sizeof(r)) return invalidArgument("a registry request of %zu bytes", request.size());
  memcpy(&r, request.data(), sizeof(r));
  const auto key = std::make_pair(static_cast<int>(r.owner), r.id);
  if (r.ask == Ask::kUnmap) {
    std::shared_ptr<void> gone;
    {
      std::lock_guard<std::mutex> lock(importsMu_);
      auto it = imports_.find(key);
      if (it != imports_.end()) {
        gone = std::move(it->second);
        imports_.erase(it);
      }
    }
    return std::string();  // `gone` unmaps outside the lock
  }
  std::vector<size_t> sizes;
  if (r.ask != Ask::kMap || fds.empty() || !decodeSegments(request.substr(sizeof(r)), fds.size(), &sizes)) {
    return invalidArgument("a registry request without its descriptors and their sizes");
  }
  Result<DeviceFifoMem> m = memory_->importSegments(fds, sizes);
  if (!m.isOk()) {
    return m.status().withContext(strPrintf("rank %d mapping rank %d's registered buffer (%llu bytes)", rank_, r.owner,
                                            static_cast<unsigned long long>(r.bytes)));
  }
  const uint64_t at = reinterpret_cast<uint64_t>(m.value().base);
  std::lock_guard<std::mutex> lock(importsMu_);
  imports_[key] = std::move(m.value().owner);
  return std::string(reinterpret_cast<const char*>(&at), sizeof(at));
}

void DirectRegistry::unmapAt(int rank, uint64_t id) const {
  const Request r{Ask::kUnmap, rank_, id, 0};
  bool absent = false;  // the peer's registry is gone, and its mappings with it
  Result<std::string> a = callFdService(ranks_[static_cast<size_t>(rank)].service, {}, encode(r),
                                        std::min(timeoutSec_, kUnmapWaitSec), &absent);
  if (!a.isOk() && !absent) {
    BRAID_INFO(kLogReg, "rank %d: rank %d did not unmap a registered buffer: %s", rank_, rank,
               a.status().message().c_str());
  }
}

void DirectRegistry::add(const void* handle, const void* base, size_t bytes) {
  const int n = static_cast<int>(ranks_.size());
  Result<ShareableRange> found = findShareable(api_, base, bytes);
  if (!found.isOk()) {
    BRAID_INFO(kLogReg, "rank %d: registered buffer %p (%zu bytes) is staged by NVLS-style collectives: %s", rank_,
               base, bytes, found.status().message().c_str());
    return;
  }
  const ShareableRange& range = found.value();
  Mine m;
  m.base = static_cast<const char*>(base);
  m.bytes = bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    m.id = nextId_++;
  }
  m.at.assign(static_cast<size_t>(n), 0);
  const size_t offset = static_cast<size_t>(m.base - range.base);
  std::string why;
  std::vector<int> fds;
  int local = 0;
  for (int q = 0; q < n && why.empty(); ++q) {
    const Rank& peer = ranks_[static_cast<size_t>(q)];
    if (q == rank_) {
      m.at[static_cast<size_t>(q)] = reinterpret_cast<uint64_t>(base);
    } else if (peer.pid == ranks_[static_cast<size_t>(rank_)].pid) {
      if (std::find(range.devices.begin(), range.devices.end(), peer.device) == range.devices.end()) {
        why = strPrintf("rank %d's GPU %d has no access to it (no peer access with GPU %d)", q, peer.device,
                        range.device);
      }
      m.at[static_cast<size_t>(q)] = reinterpret_cast<uint64_t>(base);
      ++local;
    } else {
      if (fds.empty()) {
        Result<std::vector<int>> e = exportShareable(api_, range);
        if (!e.isOk()) {
          why = e.status().message();
          break;
        }
        fds = e.value();
      }
      const Request r{Ask::kMap, rank_, m.id, range.bytes};
      Result<std::string> a = callFdService(peer.service, fds, encode(r) + encodeSegments(range.segments), timeoutSec_);
      uint64_t there = 0;
      if (a.isOk() && a.value().size() == sizeof(there)) {
        memcpy(&there, a.value().data(), sizeof(there));
        m.at[static_cast<size_t>(q)] = there + offset;
        m.imported.push_back(q);
      } else {
        why = strPrintf("rank %d could not map it: %s", q,
                        a.isOk() ? "a malformed answer" : a.status().message().c_str());
      }
    }
  }
  for (int fd : fds) close(fd);
  if (!why.empty()) {
    for (int q : m.imported) unmapAt(q, m.id);
    BRAID_INFO(kLogReg, "rank %d: registered buffer %p (%zu bytes) is staged by NVLS-style collectives: %s", rank_,
               base, bytes, why.c_str());
    return;
  }
  BRAID_INFO(kLogReg,
             "rank %d: registered buffer %p (%zu bytes) is read in place by NVLS-style collectives: %d peer(s) of this "
             "process reach it, %zu of other processes mapped it",
             rank_, base, bytes, local, m.imported.size());
  std::lock_guard<std::mutex> lock(mu_);
  mine_[handle] = std::move(m);
}

void DirectRegistry::remove(const void* handle) {
  Mine m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = mine_.find(handle);
    if (it == mine_.end()) return;
    m = std::move(it->second);
    mine_.erase(it);
  }
  for (int q : m.imported) unmapAt(q, m.id);
}

bool DirectRegistry::peerAddresses(const void* p, size_t bytes, uint64_t* out) const {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : mine_) {
    const Mine& m = e.second;
    if (c < m.base || static_cast<size_t>(c - m.base) >= m.bytes || bytes > m.bytes - static_cast<size_t>(c - m.base)) {
      continue;
    }
    for (size_t q = 0; q < m.at.size(); ++q) out[q] = m.at[q] + static_cast<uint64_t>(c - m.base);
    return true;
  }
  return false;
}

}  // namespace braid
