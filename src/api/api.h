// The C boundary: every extern "C" entry point runs its body through apiCall, which catches everything, maps the
// Status to ncclResult_t, writes one WARN naming the function, and records the text for ncclGetLastError.
#pragma once

#include <exception>
#include <new>

#include "include/nccl.h"
#include "src/common/logging.h"
#include "src/common/status.h"

// Defines pnccl<name> with default visibility and nccl<name> as a weak alias of it, so tools can interpose either.
#define BRAID_API(ret, name, ...)                                                                  \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);                      \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  ret p##name(__VA_ARGS__)

namespace braid {

template <typename F>
ncclResult_t apiCall(const char* fn, F&& body) {
  Status st;
  try {
    st = body();
  } catch (const std::bad_alloc&) {
    st = systemError("out of host memory");
  } catch (const std::exception& e) {
    st = internalError("unexpected exception: %s", e.what());
  } catch (...) {
    st = internalError("unexpected unknown exception");
  }
  if (st.isOk() || st.code() == Code::kInProgress) {
    clearThreadCallError();
    return st.isOk() ? ncclSuccess : ncclInProgress;
  }
  const std::string text = strPrintf("%s: %s", fn, st.message().c_str());
  BRAID_WARN("%s", text.c_str());
  setThreadCallError(text);
  return static_cast<ncclResult_t>(st.code());
}

// Shared argument checks (messages name the argument and its value).
Status checkNotNull(const void* p, const char* fn, const char* arg);

// Returns an explicit "not supported yet" error for a declared but unimplemented NCCL function.
Status notSupported(const char* fn, const char* why);

}  // namespace braid
