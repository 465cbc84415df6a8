#include "src/core/window_table.h"

#include <cstddef>

#include "src/backends/backend.h"

namespace braid {

WindowTable::~WindowTable() {
  for (void* c : chunks_) backend_->freeDeviceBlock(c);
}

Status WindowTable::grow() {
  BRAID_ASSIGN_OR_RETURN(void* chunk, backend_->allocDeviceBlock(sizeof(Chunk)));
  Chunk empty{};
  empty.next = nullptr;
  Status st = backend_->writeDeviceBlock(chunk, &empty, sizeof(empty));
  // The new chunk is complete before the last one points at it, so a reader never follows a link into garbage.
  if (st.isOk() && !chunks_.empty()) {
    st = backend_->writeDeviceBlock(static_cast<char*>(chunks_.back()) + offsetof(Chunk, next), &chunk, sizeof(chunk));
  }
  if (!st.isOk()) {
    backend_->freeDeviceBlock(chunk);
    return st.withContext("growing the device window table");
  }
  chunks_.push_back(chunk);
  mirror_.resize(chunks_.size() * kPerChunk);
  return Status::ok();
}

Result<const void*> WindowTable::head() {
  if (chunks_.empty()) BRAID_RETURN_IF_ERROR(grow());
  return static_cast<const void*>(chunks_.front());
}

Status WindowTable::write(size_t index) {
  char* chunk = static_cast<char*>(chunks_[index / kPerChunk]);
  return backend_->writeDeviceBlock(chunk + offsetof(Chunk, entries) + (index % kPerChunk) * sizeof(Entry),
                                    &mirror_[index], sizeof(Entry));
}

Status WindowTable::add(const void* base, size_t size, const void* window) {
  size_t index = 0;
  while (index < mirror_.size() && mirror_[index].window != nullptr) ++index;
  if (index == mirror_.size()) BRAID_RETURN_IF_ERROR(grow());
  mirror_[index] = Entry{reinterpret_cast<uintptr_t>(base), size, window};
  Status st = write(index);
  if (!st.isOk()) mirror_[index] = Entry{};
  return st;
}

Status WindowTable::remove(const void* window) {
  for (size_t i = 0; i < mirror_.size(); ++i) {
    if (mirror_[i].window != window) continue;
    mirror_[i] = Entry{};
    return write(i);
  }
  return Status::ok();
}

}  // namespace braid
