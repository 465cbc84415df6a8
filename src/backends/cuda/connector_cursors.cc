#include "src/backends/cuda/connector_cursors.h"

#include "transports/transport.h"

namespace braid {
namespace {

constexpr size_t kBlockBytes = 4096;

}  // namespace

FifoCursor* ConnectorCursors::cursorFor(void* connector, CUstream init) {
  auto it = cursors_.find(connector);
  if (it != cursors_.end()) return it->second;
  constexpr size_t kPerBlock = kBlockBytes / sizeof(FifoCursor);
  if (blocks_.empty() || used_ == kPerBlock) {
    if (block_ + 1 < blocks_.size()) {
      ++block_;  // a block kept from before forgetAll
    } else {
      Result<CUdeviceptr> block = memory_->takeDevice(kBlockBytes, "connector cursors");
      if (!block.isOk()) return nullptr;
      blocks_.push_back(block.value());
      block_ = blocks_.size() - 1;
    }
    used_ = 0;
  }
  auto* c = reinterpret_cast<FifoCursor*>(blocks_[block_]) + used_;
  const FifoCursor start = static_cast<Connector*>(connector)->cursor();
  if (api_->memcpyAsync(reinterpret_cast<CUdeviceptr>(c), reinterpret_cast<CUdeviceptr>(&start), sizeof(start), init) !=
          kCuSuccess ||
      api_->streamSynchronize(init) != kCuSuccess) {
    return nullptr;
  }
  ++used_;
  cursors_[connector] = c;
  return c;
}

void ConnectorCursors::forgetAll() {
  cursors_.clear();
  block_ = 0;
  used_ = 0;
}

}  // namespace braid
