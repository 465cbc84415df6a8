// NCCL 2.30's parameter API (ncclParamBind, ncclParamGet*, ...) over braid's one registry (src/common/params.h): a
// handle is the knob's declaration, and every read is live (the env plugin where one is loaded, the environment,
// configuration files, the default), as the communicators read it.
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "src/api/api.h"
#include "src/common/params.h"

// The handle type is opaque in nccl.h: here it is a knob's declaration.
struct ncclParamHandle {
  const braid::ParamDef* def;
};

namespace braid {
namespace {

// Every knob's handle, made once (the handles live as long as the library, as NCCL's do).
const std::vector<ncclParamHandle>& handles() {
  static const std::vector<ncclParamHandle> all = [] {
    std::vector<ncclParamHandle> v;
    for (const ParamDef* d : allParams()) v.push_back(ncclParamHandle{d});
    return v;
  }();
  return all;
}

// The knob a key names: its full name ("NCCL_ALGO", "BRAID_TIMEOUT") or an NCCL_ one without the prefix ("ALGO").
Result<const ncclParamHandle*> find(const char* key) {
  if (key == nullptr) return invalidArgument("key is NULL");
  for (const ncclParamHandle& h : handles()) {
    const char* name = h.def->name;
    if (strcmp(name, key) == 0 || (strncmp(name, "NCCL_", 5) == 0 && strcmp(name + 5, key) == 0)) return &h;
  }
  return invalidArgument("key \"%s\" names no parameter (braid-info lists them)", key);
}

Status checkHandle(ncclParamHandle_t h) {
  for (const ncclParamHandle& known : handles()) {
    if (&known == h) return Status::ok();
  }
  return invalidArgument("handle %p did not come from ncclParamBind", static_cast<void*>(h));
}

// The value as an integer of type T, or an error naming the knob, its text and the type's range.
template <typename T>
Status getInt(ncclParamHandle_t h, T* out, const char* fn) {
  BRAID_RETURN_IF_ERROR(checkHandle(h));
  BRAID_RETURN_IF_ERROR(checkNotNull(out, fn, "out"));
  const std::string text = lookupParam(*h->def).text;
  if (text.empty()) return invalidArgument("%s is not set and has no default", h->def->name);
  errno = 0;
  char* end = nullptr;
  if constexpr (std::is_signed_v<T>) {
    const long long v = strtoll(text.c_str(), &end, 0);
    if (errno == 0 && *end == '\0' && v >= static_cast<long long>(std::numeric_limits<T>::min()) &&
        v <= static_cast<long long>(std::numeric_limits<T>::max())) {
      *out = static_cast<T>(v);
      return Status::ok();
    }
  } else {
    const unsigned long long v = strtoull(text.c_str(), &end, 0);
    if (errno == 0 && *end == '\0' && text[0] != '-' &&
        v <= static_cast<unsigned long long>(std::numeric_limits<T>::max())) {
      *out = static_cast<T>(v);
      return Status::ok();
    }
  }
  return invalidArgument("%s=\"%s\" is not a %s integer from %lld to %llu", h->def->name, text.c_str(),
                         std::is_signed_v<T> ? "signed" : "unsigned",
                         static_cast<long long>(std::numeric_limits<T>::min()),
                         static_cast<unsigned long long>(std::numeric_limits<T>::max()));
}

}  // namespace
}  // namespace braid

using namespace braid;

BRAID_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key) {
  return apiCall("ncclParamBind", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(out, "ncclParamBind", "out"));
    BRAID_ASSIGN_OR_RETURN(const ncclParamHandle* h, find(key));
    *out = const_cast<ncclParamHandle*>(h);
    return Status::ok();
  });
}

#define BRAID_PARAM_GETTER(Suffix, T)                                                                    \
  BRAID_API(ncclResult_t, ncclParamGet##Suffix, ncclParamHandle_t h, T* out) {                           \
    return apiCall("ncclParamGet" #Suffix, [&]() { return getInt<T>(h, out, "ncclParamGet" #Suffix); }); \
  }
BRAID_PARAM_GETTER(I8, int8_t)
BRAID_PARAM_GETTER(I16, int16_t)
BRAID_PARAM_GETTER(I32, int32_t)
BRAID_PARAM_GETTER(I64, int64_t)
BRAID_PARAM_GETTER(U8, uint8_t)
BRAID_PARAM_GETTER(U16, uint16_t)
BRAID_PARAM_GETTER(U32, uint32_t)
BRAID_PARAM_GETTER(U64, uint64_t)
#undef BRAID_PARAM_GETTER

BRAID_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out) {
  return apiCall("ncclParamGetStr", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkHandle(h));
    BRAID_RETURN_IF_ERROR(checkNotNull(out, "ncclParamGetStr", "out"));
    thread_local std::string text;  // valid until this thread's next call
    text = lookupParam(*h->def).text;
    *out = text.c_str();
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return apiCall("ncclParamGet", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkHandle(h));
    BRAID_RETURN_IF_ERROR(checkNotNull(out, "ncclParamGet", "out"));
    BRAID_RETURN_IF_ERROR(checkNotNull(len, "ncclParamGet", "len"));
    const std::string text = lookupParam(*h->def).text;
    if (maxLen < 0 || static_cast<size_t>(maxLen) < text.size() + 1) {
      return invalidArgument("maxLen=%d: %s's value needs %zu bytes with its NUL", maxLen, h->def->name,
                             text.size() + 1);
    }
    memcpy(out, text.c_str(), text.size() + 1);
    *len = static_cast<int>(text.size());
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen) {
  return apiCall("ncclParamGetParameter", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(value, "ncclParamGetParameter", "value"));
    BRAID_RETURN_IF_ERROR(checkNotNull(valueLen, "ncclParamGetParameter", "valueLen"));
    BRAID_ASSIGN_OR_RETURN(const ncclParamHandle* h, find(key));
    thread_local std::string text;
    text = lookupParam(*h->def).text;
    *value = text.c_str();
    *valueLen = static_cast<int>(text.size());
    return Status::ok();
  });
}

BRAID_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen) {
  return apiCall("ncclParamGetAllParameterKeys", [&]() -> Status {
    BRAID_RETURN_IF_ERROR(checkNotNull(table, "ncclParamGetAllParameterKeys", "table"));
    BRAID_RETURN_IF_ERROR(checkNotNull(tableLen, "ncclParamGetAllParameterKeys", "tableLen"));
    thread_local std::vector<const char*> keys;
    keys.clear();
    for (const ncclParamHandle& h : handles()) keys.push_back(h.def->name);
    *table = keys.data();
    *tableLen = static_cast<int>(keys.size());
    return Status::ok();
  });
}

BRAID_API(void, ncclParamDumpAll, void) {
  for (const ncclParamHandle& h : handles()) {
    const ParamValue v = lookupParam(*h.def);
    BRAID_INFO(kLogEnv, "%s=%s (%s)", h.def->name, v.text.c_str(), v.source.c_str());
  }
}
