// Status and Result<T>: the error currency of every internal layer.
//
// Internals never throw across layers and never call exit(); they return a Status (or a Result<T>) whose code maps
// one-to-one onto ncclResult_t at the C boundary (src/api/). The message is what the user finally reads in the WARN
// line and from ncclGetLastError, so it should name the argument, the value and, where it helps, the remedy.
#pragma once

#include <cstdarg>
#include <string>
#include <utility>

namespace braid {

// Values are ncclResult_t's, so the API layer maps with a cast.
enum class Code : int {
  kOk = 0,
  kCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

// leveldb's shape: an OK status is one null pointer, so the operation path (which makes, moves and drops a few dozen
// of them per call) costs no string work; a failure owns its code and message on the heap. A moved-from status is
// OK.
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  // Code::kOk makes an OK status whatever `msg` says.
  Status(Code code, std::string msg) : rep_(code == Code::kOk ? nullptr : new Rep{code, std::move(msg)}) {}
  Status(const Status& o) : rep_(o.rep_ == nullptr ? nullptr : new Rep(*o.rep_)) {}
  Status(Status&& o) noexcept : rep_(o.rep_) { o.rep_ = nullptr; }
  Status& operator=(const Status& o) {
    if (this != &o) {
      Rep* copy = o.rep_ == nullptr ? nullptr : new Rep(*o.rep_);
      delete rep_;
      rep_ = copy;
    }
    return *this;
  }
  Status& operator=(Status&& o) noexcept {
    if (this != &o) {
      delete rep_;
      rep_ = o.rep_;
      o.rep_ = nullptr;
    }
    return *this;
  }
  ~Status() { delete rep_; }

  static Status ok() { return Status(); }
  bool isOk() const { return rep_ == nullptr; }
  Code code() const { return rep_ == nullptr ? Code::kOk : rep_->code; }
  const std::string& message() const { return rep_ == nullptr ? emptyMessage() : rep_->msg; }

  // Prefixes context ("while connecting to rank 3: ") without losing the code.
  Status withContext(const std::string& ctx) const {
    if (isOk()) return *this;
    return Status(rep_->code, ctx + ": " + rep_->msg);
  }

 private:
  struct Rep {
    Code code;
    std::string msg;
  };
  static const std::string& emptyMessage();
  Rep* rep_ = nullptr;
};

// printf-style message formatting used by the error constructors below.
std::string strPrintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strVPrintf(const char* fmt, va_list ap);

Status invalidArgument(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status invalidUsage(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status systemError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status internalError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status remoteError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// systemError with ": <strerror(err)> (errno <err>)" appended.
Status errnoError(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool isOk() const { return status_.isOk(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T&& take() { return std::move(value_); }

 private:
  Status status_;
  T value_{};
};

}  // namespace braid

#define BRAID_CONCAT_INNER(a, b) a##b
#define BRAID_CONCAT(a, b) BRAID_CONCAT_INNER(a, b)

// Propagates a failed Status to the caller.
#define BRAID_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::braid::Status braid_status_ = (expr);          \
    if (!braid_status_.isOk()) return braid_status_; \
  } while (0)

// `BRAID_ASSIGN_OR_RETURN(auto x, makeX());` declares x from a Result or returns its Status.
#define BRAID_ASSIGN_OR_RETURN(lhs, expr) BRAID_ASSIGN_OR_RETURN_IMPL(BRAID_CONCAT(braid_result_, __LINE__), lhs, expr)
#define BRAID_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.isOk()) return tmp.status();             \
  lhs = tmp.take()
