// compat_loaded_library: a program linked against braid's libnccl.so.2 really loads the build's copy, not the one
// the dynamic linker cache knows about (NVIDIA's NCCL under /usr/local/cuda on our machines).
//
// Usage: compat_loaded_library BUILD_DIR
// Fails unless exactly one libnccl.so* is loaded, it lies inside BUILD_DIR, the library that defines ncclGetVersion is
// that one, and no libnccl* from /usr/local/cuda* is in the process.

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <nccl.h>
#include <stdlib.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsInside(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

bool IsNcclLibrary(const std::string& path) {
  return BaseName(path).rfind("libnccl.so", 0) == 0;
}

bool IsNvidiaNccl(const std::string& path) {
  const std::string cuda = "/usr/local/cuda";
  return BaseName(path).rfind("libnccl", 0) == 0 && (path.rfind(cuda, 0) == 0 || RealPath(path).rfind(cuda, 0) == 0);
}

int CollectObject(struct dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
    static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s BUILD_DIR\n", argv[0]);
    return 2;
  }
  const std::string build_dir = RealPath(argv[1]);
  int failures = 0;

  // Calling the function makes sure the program is bound to libnccl.so.2 (DT_NEEDED, symbol resolved).
  int version = 0;
  ncclResult_t result = ncclGetVersion(&version);
  std::printf("ncclGetVersion -> %d, version %d (header %d)\n", static_cast<int>(result), version, NCCL_VERSION_CODE);

  std::vector<std::string> objects;
  dl_iterate_phdr(CollectObject, &objects);
  std::vector<std::string> nccl_libraries;
  for (const std::string& object : objects) {
    if (IsNcclLibrary(object)) nccl_libraries.push_back(object);
    if (IsNvidiaNccl(object)) {
      std::printf("FAIL: NVIDIA's NCCL is loaded: %s\n", object.c_str());
      ++failures;
    }
  }
  if (nccl_libraries.size() != 1) {
    std::printf("FAIL: expected exactly one libnccl.so* in the process, found %zu\n", nccl_libraries.size());
    ++failures;
  }
  for (const std::string& library : nccl_libraries) {
    const std::string real = RealPath(library);
    bool inside = IsInside(real, build_dir);
    std::printf("loaded: %s (%s) %s\n", library.c_str(), real.c_str(), inside ? "inside the build dir" : "OUTSIDE");
    if (!inside) ++failures;
  }

  // Which object defines ncclGetVersion. In a non-PIE program the function's address can be the program's own PLT
  // stub, so dladdr names the program; then ask the loader for the object whose SONAME is libnccl.so.2.
  std::string defining;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0 && info.dli_fname != nullptr &&
      IsNcclLibrary(info.dli_fname)) {
    defining = info.dli_fname;
  } else if (void* handle = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD)) {
    struct link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) defining = map->l_name;
    dlclose(handle);
  }
  std::printf("ncclGetVersion is defined in: %s\n", defining.empty() ? "(unknown)" : defining.c_str());
  if (defining.empty() || !IsInside(RealPath(defining), build_dir)) {
    std::printf("FAIL: ncclGetVersion does not come from a library inside %s\n", build_dir.c_str());
    ++failures;
  }

  if (failures != 0) {
    std::printf("FAIL: %d problem(s); loaded objects:\n", failures);
    for (const std::string& object : objects) std::printf("  %s\n", object.c_str());
    return 1;
  }
  std::printf("PASS: braid's libnccl.so.2 from the build dir is the one loaded\n");
  return 0;
}
