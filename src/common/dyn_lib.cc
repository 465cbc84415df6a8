#include "src/common/dyn_lib.h"

#include <dlfcn.h>

namespace braid {

Result<DynLib> DynLib::open(const std::string& name) {
  dlerror();
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return systemError("%s could not be loaded: %s", name.c_str(), err != nullptr ? err : "unknown dlopen error");
  }
  DynLib lib;
  lib.handle_ = handle;
  lib.name_ = name;
  return lib;
}

void* DynLib::lookup(const char* symbol, const char* version, std::string* error) {
  if (handle_ == nullptr) {
    *error = strPrintf("%s: library not loaded", name_.c_str());
    return nullptr;
  }
  dlerror();
  void* fn = version != nullptr ? dlvsym(handle_, symbol, version) : dlsym(handle_, symbol);
  if (fn == nullptr) {
    const char* err = dlerror();
    *error = strPrintf("%s has no %s%s%s (%s)", name_.c_str(), symbol, version != nullptr ? "@" : "",
                       version != nullptr ? version : "", err != nullptr ? err : "null symbol");
    return nullptr;
  }
  if (version != nullptr && dlsym(handle_, symbol) != fn) notDefault_.push_back(strPrintf("%s@%s", symbol, version));
  return fn;
}

std::vector<std::string> pluginCandidates(const std::string& prefix, const std::string& spec) {
  if (spec.empty()) return {"lib" + prefix + ".so"};
  if (spec.find('/') != std::string::npos) return {spec};
  return {"lib" + prefix + "-" + spec + ".so", spec};
}

void* openPluginLibrary(const std::vector<std::string>& candidates, std::string* path, std::string* failures) {
  failures->clear();
  for (const std::string& c : candidates) {
    dlerror();
    if (void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = c;
      return handle;
    }
    const char* err = dlerror();
    if (!failures->empty()) *failures += "; ";
    *failures += c + ": " + (err != nullptr ? err : "unknown dlopen error");
  }
  return nullptr;
}

}  // namespace braid
