// A shared library opened at run time, and typed function pointers resolved from it. The built-in IB and OFI
// networks load libibverbs and libfabric this way, so that libnccl.so.2 needs neither to load (as NCCL does for
// verbs): they compile against the libraries' headers, and only the functions the library really exports go
// through pointers; the headers' static inline calls (ibv_post_send, fi_tsend, ...) dispatch through the
// library's own context and ops tables and need no symbol.
//
// Symbol versions. libibverbs and libfabric version their symbols (ibv_reg_mr@@IBVERBS_1.1, fi_getinfo@@FABRIC_1.3)
// and keep older versions with older struct layouts. A direct link binds the version that was the default when the
// program was built, matching the headers it was compiled with; bind() therefore asks for that version by name
// (dlvsym) instead of taking whatever the library installed at run time calls its default (dlsym). A library too
// old to have that version is refused, naming the symbol, rather than called with the wrong layout.
#pragma once

#include <string>
#include <vector>

#include "src/common/status.h"

namespace braid {

class DynLib {
 public:
  DynLib() = default;

  // dlopen(name, RTLD_NOW | RTLD_LOCAL); `name` is a soname searched as ld.so does, or a path. The library stays
  // loaded until the process exits (its functions are kept in tables). Error (kSystemError):
  // "<name> could not be loaded: <dlerror()>".
  [[nodiscard]] static Result<DynLib> open(const std::string& name);

  // Resolves `symbol` at ELF version `version` (null: the library's default) into fn. Error (kSystemError) names
  // the library, symbol@version and dlerror().
  template <typename F>
  [[nodiscard]] Status bind(F*& fn, const char* symbol, const char* version) {
    std::string error;
    fn = reinterpret_cast<F*>(lookup(symbol, version, &error));
    if (fn == nullptr) return systemError("%s", error.c_str());
    return Status::ok();
  }

  // The same for a function the library may lack (a newer feature): fn stays null when it is missing.
  template <typename F>
  void bindOptional(F*& fn, const char* symbol, const char* version) {
    std::string error;
    fn = reinterpret_cast<F*>(lookup(symbol, version, &error));
  }

  const std::string& name() const { return name_; }

  // "symbol@version" for each bound symbol whose requested version is not the library's default: the library is
  // newer than the headers braid was built with. Informational (the old version is what
  // the headers expect); a test checks it is empty on the build host, where headers and library match.
  const std::vector<std::string>& notDefault() const { return notDefault_; }

 private:
  void* lookup(const char* symbol, const char* version, std::string* error);

  void* handle_ = nullptr;
  std::string name_;
  std::vector<std::string> notDefault_;
};

// Plugin libraries (net, tuner): the files a plugin setting names, in the order NCCL tries them. "" ->
// lib<prefix>.so; a path (it has a '/') -> only itself; NAME -> lib<prefix>-NAME.so, then NAME as given.
std::vector<std::string> pluginCandidates(const std::string& prefix, const std::string& spec);
// dlopen()s (RTLD_NOW | RTLD_LOCAL) the first candidate that loads and sets *path; null when none does, with
// *failures listing each file and its dlerror(). The caller dlclose()s the handle.
void* openPluginLibrary(const std::vector<std::string>& candidates, std::string* path, std::string* failures);

// A table of a library's functions (a struct with `name` and `notDefault` fields beside the pointers), loaded
// once per process: the first call opens `lib` and runs bindAll; later calls return the same table or the same
// error. Thread-safe (a function-local static). Each Table type has one table, so every caller of loadTableOnce<T>
// must pass the same arguments.
template <typename Table>
Result<const Table*> loadTableOnce(const std::string& lib, Status (*bindAll)(DynLib&, Table*)) {
  static const Result<const Table*> loaded = [&]() -> Result<const Table*> {
    Result<DynLib> dl = DynLib::open(lib);
    if (!dl.isOk()) return dl.status();
    static Table table;
    BRAID_RETURN_IF_ERROR(bindAll(dl.value(), &table));
    table.name = dl.value().name();
    table.notDefault = dl.value().notDefault();
    return static_cast<const Table*>(&table);
  }();
  return loaded;
}

}  // namespace braid
