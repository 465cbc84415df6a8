#include "src/common/status.h"

#include <cstdio>
#include <cstring>

namespace braid {

const std::string& Status::emptyMessage() {
  static const std::string* empty = new std::string();  // never destroyed: statuses are read during exit too
  return *empty;
}

std::string strVPrintf(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return std::string();
  std::string out(static_cast<size_t>(n) + 1, '\0');
  vsnprintf(out.data(), out.size(), fmt, ap);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string strPrintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = strVPrintf(fmt, ap);
  va_end(ap);
  return s;
}

#define BRAID_DEFINE_ERROR_CTOR(fn, code) \
  Status fn(const char* fmt, ...) {       \
    va_list ap;                           \
    va_start(ap, fmt);                    \
    std::string s = strVPrintf(fmt, ap);  \
    va_end(ap);                           \
    return Status(code, std::move(s));    \
  }

BRAID_DEFINE_ERROR_CTOR(invalidArgument, Code::kInvalidArgument)
BRAID_DEFINE_ERROR_CTOR(invalidUsage, Code::kInvalidUsage)
BRAID_DEFINE_ERROR_CTOR(systemError, Code::kSystemError)
BRAID_DEFINE_ERROR_CTOR(internalError, Code::kInternalError)
BRAID_DEFINE_ERROR_CTOR(remoteError, Code::kRemoteError)
#undef BRAID_DEFINE_ERROR_CTOR

Status errnoError(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = strVPrintf(fmt, ap);
  va_end(ap);
  char buf[128];
  const char* text = strerror_r(err, buf, sizeof(buf));
  return Status(Code::kSystemError, s + ": " + text + " (errno " + std::to_string(err) + ")");
}

}  // namespace braid
