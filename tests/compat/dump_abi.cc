// Prints, one "name = value" line each, everything about an nccl.h that a binary compiled against it depends on:
// constants, enum values, macro values and their types, struct sizes and field offsets, initializer values and the
// exact type of every API function (as a mangled C++ type name, which spells out parameter and return types and
// the struct/enum names they use). Uses only compile-time information and links no NCCL library.
//
// It is compiled twice, once against braid's include/nccl.h and once against NVIDIA's, and compare_headers.py diffs
// the two outputs. Which header was used goes to stderr so the outputs themselves stay comparable.

#include <nccl.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <typeinfo>

namespace {

template <typename T>
const char* TypeName() {
  return typeid(T).name();
}

void PrintInt(const char* name, const char* type, long long value) {
  std::printf("%s = %lld : %s\n", name, value, type);
}

template <typename T>
void PrintValue(const char* name, T value) {
  if constexpr (std::is_pointer_v<T> || std::is_null_pointer_v<T>) {
    std::printf("%s = %s : %s\n", name, value == nullptr ? "null" : "non-null", TypeName<T>());
  } else if constexpr (std::is_floating_point_v<T>) {
    std::printf("%s = %a : %s\n", name, static_cast<double>(value), TypeName<T>());
  } else if constexpr (std::is_enum_v<T>) {
    PrintInt(name, TypeName<T>(), static_cast<long long>(value));
  } else {
    PrintInt(name, TypeName<T>(), static_cast<long long>(value));
  }
}

template <typename E>
void PrintEnumType(const char* name) {
  using U = std::underlying_type_t<E>;
  std::printf("enum %s : name %s, sizeof %zu, alignof %zu, underlying %s\n", name, TypeName<E>(), sizeof(E), alignof(E),
              TypeName<U>());
}

template <typename S>
void PrintStructType(const char* name) {
  std::printf("struct %s : name %s, sizeof %zu, alignof %zu, standard_layout %d, trivial %d\n", name, TypeName<S>(),
              sizeof(S), alignof(S), static_cast<int>(std::is_standard_layout_v<S>),
              static_cast<int>(std::is_trivial_v<S>));
}

}  // namespace

// Every function of NCCL 2.28.9's nccl.h (each also exists with a 'p' prefix).
// clang-format off
#define BRAID_NCCL_FUNCTIONS(X)                                                                                  \
  X(MemAlloc) X(MemFree) X(GetVersion) X(GetUniqueId) X(CommInitRankConfig) X(CommInitRank) X(CommInitAll)       \
  X(CommFinalize) X(CommDestroy) X(CommAbort) X(CommRevoke) X(CommSplit) X(CommShrink) X(CommInitRankScalable)   \
  X(GetErrorString) X(GetLastError) X(ResetDebugInit) X(CommGetAsyncError) X(CommCount) X(CommCuDevice)          \
  X(CommUserRank) X(CommRegister) X(CommDeregister) X(CommWindowRegister) X(CommWindowDeregister)                \
  X(RedOpCreatePreMulSum) X(RedOpDestroy) X(Reduce) X(Bcast) X(Broadcast) X(AllReduce) X(ReduceScatter)          \
  X(AllGather) X(AlltoAll) X(Gather) X(Scatter) X(Send) X(Recv) X(GroupStart) X(GroupEnd) X(GroupSimulateEnd)

#define BRAID_CONFIG_FIELDS(X)                                                                                   \
  X(size) X(magic) X(version) X(blocking) X(cgaClusterSize) X(minCTAs) X(maxCTAs) X(netName) X(splitShare)       \
  X(trafficClass) X(commName) X(collnetEnable) X(CTAPolicy) X(shrinkShare) X(nvlsCTAs) X(nChannelsPerNetPeer)    \
  X(nvlinkCentricSched)

#define BRAID_SIM_INFO_FIELDS(X) X(size) X(magic) X(version) X(estimatedTime)

// What NCCL 2.29-2.31 added: functions, ncclConfig_t's fields, ncclCollConfig_t's.
#define BRAID_NCCL_FUNCTIONS_2_31(X)                                                                             \
  X(CommGetUniqueId) X(CommGrow) X(CommSuspend) X(CommResume) X(CommMemStats) X(WinGetUserPtr)                   \
  X(AllReduceConfig) X(BroadcastConfig) X(ReduceConfig) X(AllGatherConfig) X(ReduceScatterConfig)                \
  X(AlltoAllConfig) X(GatherConfig) X(ScatterConfig) X(PutSignal) X(Signal) X(WaitSignal) X(ParamBind)           \
  X(ParamGetI8) X(ParamGetI16) X(ParamGetI32) X(ParamGetI64) X(ParamGetU8) X(ParamGetU16) X(ParamGetU32)          \
  X(ParamGetU64) X(ParamGetStr) X(ParamGet) X(ParamGetParameter) X(ParamGetAllParameterKeys) X(ParamDumpAll)

#define BRAID_CONFIG_FIELDS_2_31(X)                                                                              \
  X(graphUsageMode) X(numRmaCtx) X(maxP2pPeers) X(graphStreamOrdering) X(launchOrderImplicit) X(numRmaSig)       \
  X(rmaEagerInit) X(hostCftMode) X(nvlsHostMode)

#define BRAID_COLLCONFIG_FIELDS(X)                                                                               \
  X(size) X(magic) X(version) X(ext) X(minCTAs) X(maxCTAs) X(nvlsCTAs) X(cgaClusterSize) X(algSelection)        \
  X(forceAlgSelection) X(CTAPolicy) X(userProfilerTag) X(launchCompletionEvent)
// clang-format on

// Values and types of object-like macros (the parentheses make decltype give the expression's type).
#define BRAID_PRINT_MACRO(m) PrintValue(#m, (m))
#define BRAID_PRINT_ENUMERATOR(e) PrintValue(#e, (e))

int main() {
#if defined(BRAID_NCCL_H)
  std::fprintf(stderr, "dump_abi: header=braid cuda_headers=%d\n", BRAID_NCCL_CUDA_HEADERS);
#else
  std::fprintf(stderr, "dump_abi: header=other\n");
#endif

  // ---- Version macros.
  BRAID_PRINT_MACRO(NCCL_MAJOR);
  BRAID_PRINT_MACRO(NCCL_MINOR);
  BRAID_PRINT_MACRO(NCCL_PATCH);
  std::printf("NCCL_SUFFIX = \"%s\" : %s\n", NCCL_SUFFIX, TypeName<decltype(NCCL_SUFFIX)>());
  BRAID_PRINT_MACRO(NCCL_VERSION_CODE);
  PrintValue("NCCL_VERSION(2,28,9)", NCCL_VERSION(2, 28, 9));
  PrintValue("NCCL_VERSION(2,8,4)", NCCL_VERSION(2, 8, 4));
  PrintValue("NCCL_VERSION(2,9,0)", NCCL_VERSION(2, 9, 0));
  PrintValue("NCCL_VERSION(3,0,1)", NCCL_VERSION(3, 0, 1));
  PrintValue("NCCL_VERSION(NCCL_MAJOR,NCCL_MINOR,NCCL_PATCH)", NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));

  // ---- Constants.
  {
    ncclComm_t null_comm = NCCL_COMM_NULL;
    PrintValue("NCCL_COMM_NULL", null_comm);
    void* undef_ptr = NCCL_CONFIG_UNDEF_PTR;
    PrintValue("NCCL_CONFIG_UNDEF_PTR", undef_ptr);
  }
  BRAID_PRINT_MACRO(NCCL_UNIQUE_ID_BYTES);
  BRAID_PRINT_MACRO(NCCL_CONFIG_UNDEF_INT);
  BRAID_PRINT_MACRO(NCCL_SPLIT_NOCOLOR);
  BRAID_PRINT_MACRO(NCCL_UNDEF_FLOAT);
  BRAID_PRINT_MACRO(NCCL_WIN_DEFAULT);
  BRAID_PRINT_MACRO(NCCL_WIN_COLL_SYMMETRIC);
  BRAID_PRINT_MACRO(NCCL_WIN_REQUIRED_ALIGNMENT);
  BRAID_PRINT_MACRO(NCCL_CTA_POLICY_DEFAULT);
  BRAID_PRINT_MACRO(NCCL_CTA_POLICY_EFFICIENCY);
  BRAID_PRINT_MACRO(NCCL_CTA_POLICY_ZERO);
  BRAID_PRINT_MACRO(NCCL_SHRINK_DEFAULT);
  BRAID_PRINT_MACRO(NCCL_SHRINK_ABORT);
  BRAID_PRINT_MACRO(NCCL_REVOKE_DEFAULT);

  // ---- Handle and id types.
  std::printf("type ncclComm_t : %s, sizeof %zu\n", TypeName<ncclComm_t>(), sizeof(ncclComm_t));
  std::printf("type ncclWindow_t : %s, sizeof %zu\n", TypeName<ncclWindow_t>(), sizeof(ncclWindow_t));
  std::printf("type cudaStream_t : %s, sizeof %zu\n", TypeName<cudaStream_t>(), sizeof(cudaStream_t));
  PrintStructType<ncclUniqueId>("ncclUniqueId");
  std::printf("field ncclUniqueId.internal : offset %zu, sizeof %zu, type %s\n", offsetof(ncclUniqueId, internal),
              sizeof(ncclUniqueId::internal), TypeName<decltype(ncclUniqueId::internal)>());

  // ---- Enums.
  PrintEnumType<ncclResult_t>("ncclResult_t");
  BRAID_PRINT_ENUMERATOR(ncclSuccess);
  BRAID_PRINT_ENUMERATOR(ncclUnhandledCudaError);
  BRAID_PRINT_ENUMERATOR(ncclSystemError);
  BRAID_PRINT_ENUMERATOR(ncclInternalError);
  BRAID_PRINT_ENUMERATOR(ncclInvalidArgument);
  BRAID_PRINT_ENUMERATOR(ncclInvalidUsage);
  BRAID_PRINT_ENUMERATOR(ncclRemoteError);
  BRAID_PRINT_ENUMERATOR(ncclInProgress);
  BRAID_PRINT_ENUMERATOR(ncclNumResults);

  PrintEnumType<ncclRedOp_dummy_t>("ncclRedOp_dummy_t");
  BRAID_PRINT_ENUMERATOR(ncclNumOps_dummy);
  PrintEnumType<ncclRedOp_t>("ncclRedOp_t");
  BRAID_PRINT_ENUMERATOR(ncclSum);
  BRAID_PRINT_ENUMERATOR(ncclProd);
  BRAID_PRINT_ENUMERATOR(ncclMax);
  BRAID_PRINT_ENUMERATOR(ncclMin);
  BRAID_PRINT_ENUMERATOR(ncclAvg);
  BRAID_PRINT_ENUMERATOR(ncclNumOps);
  BRAID_PRINT_ENUMERATOR(ncclMaxRedOp);

  PrintEnumType<ncclDataType_t>("ncclDataType_t");
  BRAID_PRINT_ENUMERATOR(ncclInt8);
  BRAID_PRINT_ENUMERATOR(ncclChar);
  BRAID_PRINT_ENUMERATOR(ncclUint8);
  BRAID_PRINT_ENUMERATOR(ncclInt32);
  BRAID_PRINT_ENUMERATOR(ncclInt);
  BRAID_PRINT_ENUMERATOR(ncclUint32);
  BRAID_PRINT_ENUMERATOR(ncclInt64);
  BRAID_PRINT_ENUMERATOR(ncclUint64);
  BRAID_PRINT_ENUMERATOR(ncclFloat16);
  BRAID_PRINT_ENUMERATOR(ncclHalf);
  BRAID_PRINT_ENUMERATOR(ncclFloat32);
  BRAID_PRINT_ENUMERATOR(ncclFloat);
  BRAID_PRINT_ENUMERATOR(ncclFloat64);
  BRAID_PRINT_ENUMERATOR(ncclDouble);
  BRAID_PRINT_ENUMERATOR(ncclBfloat16);
  BRAID_PRINT_ENUMERATOR(ncclFloat8e4m3);
  BRAID_PRINT_ENUMERATOR(ncclFloat8e5m2);
  BRAID_PRINT_ENUMERATOR(ncclNumTypes);

  PrintEnumType<ncclScalarResidence_t>("ncclScalarResidence_t");
  BRAID_PRINT_ENUMERATOR(ncclScalarDevice);
  BRAID_PRINT_ENUMERATOR(ncclScalarHostImmediate);

  // ---- ncclConfig_t: layout, field types, initializer.
  PrintStructType<ncclConfig_t>("ncclConfig_t");
#define BRAID_PRINT_CONFIG_FIELD(f)                                                                       \
  std::printf("field ncclConfig_t.%s : offset %zu, sizeof %zu, type %s\n", #f, offsetof(ncclConfig_t, f), \
              sizeof(ncclConfig_t::f), TypeName<decltype(ncclConfig_t::f)>());
  BRAID_CONFIG_FIELDS(BRAID_PRINT_CONFIG_FIELD) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
#define BRAID_PRINT_CONFIG_INIT(f) PrintValue("NCCL_CONFIG_INITIALIZER." #f, config.f);
    BRAID_CONFIG_FIELDS(BRAID_PRINT_CONFIG_INIT)
  }

  // ---- ncclSimInfo_t: layout, field types, initializer.
  PrintStructType<ncclSimInfo_t>("ncclSimInfo_t");
#define BRAID_PRINT_SIM_FIELD(f)                                                                            \
  std::printf("field ncclSimInfo_t.%s : offset %zu, sizeof %zu, type %s\n", #f, offsetof(ncclSimInfo_t, f), \
              sizeof(ncclSimInfo_t::f), TypeName<decltype(ncclSimInfo_t::f)>());
  BRAID_SIM_INFO_FIELDS(BRAID_PRINT_SIM_FIELD) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
#define BRAID_PRINT_SIM_INIT(f) PrintValue("NCCL_SIM_INFO_INITIALIZER." #f, info.f);
    BRAID_SIM_INFO_FIELDS(BRAID_PRINT_SIM_INIT)
  }

  // ---- Functions: the full type of each, which encodes return and parameter types.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define BRAID_PRINT_FUNCTION(f)                                                \
  std::printf("function nccl%s : %s\n", #f, TypeName<decltype(&nccl##f)>());   \
  std::printf("function pnccl%s : %s\n", #f, TypeName<decltype(&pnccl##f)>()); \
  std::printf("function nccl%s == pnccl%s : %d\n", #f, #f,                     \
              static_cast<int>(std::is_same_v<decltype(&nccl##f), decltype(&pnccl##f)>));
  BRAID_NCCL_FUNCTIONS(BRAID_PRINT_FUNCTION)
#pragma GCC diagnostic pop

#ifdef NCCL_COLLCONFIG_INITIALIZER
  // ---- What NCCL 2.29-2.31 added, for a header that has it (NVIDIA's 2.28.9 does not): compare_headers.py holds it
  // to tests/fixtures/compat/nccl_2_31_additions.txt.
  std::printf("---- NCCL 2.29-2.31\n");
  BRAID_PRINT_ENUMERATOR(ncclTimeout);
  BRAID_PRINT_MACRO(NCCL_WIN_STRICT_ORDERING);
  BRAID_PRINT_MACRO(NCCL_WIN_GIN_ONLY);
  BRAID_PRINT_MACRO(NCCL_WIN_CFT_COUNTED);
  BRAID_PRINT_MACRO(NCCL_SUSPEND_MEM);
  PrintEnumType<ncclHostCftMode_t>("ncclHostCftMode_t");
  BRAID_PRINT_ENUMERATOR(ncclHostCftDefault);
  BRAID_PRINT_ENUMERATOR(ncclHostCftEnable);
  BRAID_PRINT_ENUMERATOR(ncclHostCftDisable);
  BRAID_PRINT_ENUMERATOR(ncclHostCftFallback);
  PrintEnumType<ncclNvlsHostMode_t>("ncclNvlsHostMode_t");
  BRAID_PRINT_ENUMERATOR(ncclNvlsHostModeDefault);
  BRAID_PRINT_ENUMERATOR(ncclNvlsHostModeEnable);
  BRAID_PRINT_ENUMERATOR(ncclNvlsHostModeDisableTransport);
  BRAID_PRINT_ENUMERATOR(ncclNvlsHostModeDisableSymmetricMultimem);
  BRAID_PRINT_ENUMERATOR(ncclNvlsHostModeDisable);
  PrintEnumType<ncclCommMemStat_t>("ncclCommMemStat_t");
  BRAID_PRINT_ENUMERATOR(ncclStatGpuMemSuspend);
  BRAID_PRINT_ENUMERATOR(ncclStatGpuMemSuspended);
  BRAID_PRINT_ENUMERATOR(ncclStatGpuMemPersist);
  BRAID_PRINT_ENUMERATOR(ncclStatGpuMemTotal);
  BRAID_CONFIG_FIELDS_2_31(BRAID_PRINT_CONFIG_FIELD) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    BRAID_CONFIG_FIELDS_2_31(BRAID_PRINT_CONFIG_INIT)
  }
  PrintStructType<ncclConfigExt_t>("ncclConfigExt_t");
#define BRAID_PRINT_EXT_FIELD(f)                                                                                \
  std::printf("field ncclConfigExt_t.%s : offset %zu, sizeof %zu, type %s\n", #f, offsetof(ncclConfigExt_t, f), \
              sizeof(ncclConfigExt_t::f), TypeName<decltype(ncclConfigExt_t::f)>());
  BRAID_PRINT_EXT_FIELD(next)
  BRAID_PRINT_EXT_FIELD(key)
  BRAID_PRINT_EXT_FIELD(val)
      std::printf("field ncclConfigExt_t.key.optionId : offset %zu\n", offsetof(ncclConfigExt_t, key.optionId));
  PrintStructType<ncclCollConfig_t>("ncclCollConfig_t");
#define BRAID_PRINT_CC_FIELD(f)                                                                                   \
  std::printf("field ncclCollConfig_t.%s : offset %zu, sizeof %zu, type %s\n", #f, offsetof(ncclCollConfig_t, f), \
              sizeof(ncclCollConfig_t::f), TypeName<decltype(ncclCollConfig_t::f)>());
  BRAID_COLLCONFIG_FIELDS(BRAID_PRINT_CC_FIELD) {
    ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
#define BRAID_PRINT_CC_INIT(f) PrintValue("NCCL_COLLCONFIG_INITIALIZER." #f, cc.f);
    BRAID_COLLCONFIG_FIELDS(BRAID_PRINT_CC_INIT)
  }
  PrintStructType<ncclWaitSignalDesc_t>("ncclWaitSignalDesc_t");
#define BRAID_PRINT_WS_FIELD(f)                                                        \
  std::printf("field ncclWaitSignalDesc_t.%s : offset %zu, sizeof %zu, type %s\n", #f, \
              offsetof(ncclWaitSignalDesc_t, f), sizeof(ncclWaitSignalDesc_t::f),      \
              TypeName<decltype(ncclWaitSignalDesc_t::f)>());
  BRAID_PRINT_WS_FIELD(opCnt)
  BRAID_PRINT_WS_FIELD(peer)
  BRAID_PRINT_WS_FIELD(sigIdx) BRAID_PRINT_WS_FIELD(ctx) std::printf(
      "type ncclParamHandle_t : %s, sizeof %zu\n", TypeName<ncclParamHandle_t>(), sizeof(ncclParamHandle_t));
  BRAID_NCCL_FUNCTIONS_2_31(BRAID_PRINT_FUNCTION)
#endif
  return 0;
}
