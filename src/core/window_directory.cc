#include "src/core/window_directory.h"

#include <map>
#include <mutex>

namespace braid {
namespace {

struct Directory {
  std::mutex mu;
  std::map<const ncclWindow_vidmem*, WindowView> views;
};

// Never destroyed: communicators left at exit deregister their windows from static destructors.
Directory& directory() {
  static Directory* d = new Directory;
  return *d;
}

}  // namespace

void listWindow(const ncclWindow_vidmem* handle, WindowView view) {
  Directory& d = directory();
  std::lock_guard<std::mutex> lock(d.mu);
  d.views[handle] = std::move(view);
}

void unlistWindow(const ncclWindow_vidmem* handle) {
  Directory& d = directory();
  std::lock_guard<std::mutex> lock(d.mu);
  d.views.erase(handle);
}

Result<WindowView> lookupWindow(const ncclWindow_vidmem* handle, const char* what) {
  if (handle == nullptr) return invalidArgument("%s is NULL", what);
  Directory& d = directory();
  std::lock_guard<std::mutex> lock(d.mu);
  auto it = d.views.find(handle);
  if (it == d.views.end()) {
    return invalidArgument(
        "%s=%p is not a registered window (never returned by ncclCommWindowRegister, deregistered, or its "
        "communicator destroyed)",
        what, static_cast<const void*>(handle));
  }
  return it->second;
}

}  // namespace braid
