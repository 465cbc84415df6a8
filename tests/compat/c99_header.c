/* compat_c99_header: include/nccl.h compiles as strict C99 (-std=c99 -pedantic -Werror, built by CMake with
 * C_STANDARD 99 and no extensions), its initializers and enums behave as documented in C, and the library linked
 * with it reports the version the header announces. Built twice: with the default CUDA-header policy and with
 * BRAID_NO_CUDA_HEADERS. */

#include <nccl.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* C99 has no static_assert: a negative array size fails the build instead. */
#define C99_STATIC_ASSERT(cond, tag) typedef char static_assert_##tag[(cond) ? 1 : -1]

C99_STATIC_ASSERT(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, unique_id_size);
C99_STATIC_ASSERT(NCCL_UNIQUE_ID_BYTES == 128, unique_id_bytes);
C99_STATIC_ASSERT(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) == NCCL_VERSION_CODE, version_code);
C99_STATIC_ASSERT(NCCL_VERSION_CODE == 23203, version_2_32_3);
C99_STATIC_ASSERT(sizeof(ncclRedOp_t) == sizeof(int), redop_size);
C99_STATIC_ASSERT(ncclMaxRedOp == INT_MAX, max_redop);
C99_STATIC_ASSERT(ncclNumTypes == 12 && ncclHalf == ncclFloat16 && ncclChar == ncclInt8, datatypes);
C99_STATIC_ASSERT(ncclNumResults == 9 && ncclInProgress == 7 && ncclTimeout == 8, results);

static int failures = 0;

static void Check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

int main(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclComm_t comm = NCCL_COMM_NULL;
  ncclWindow_t win = NULL;
  cudaStream_t stream = NULL;
  ncclUniqueId id;
  ncclRedOp_t op = ncclAvg;
  ncclDataType_t type = ncclBfloat16;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  ncclResult_t result;
  int version = 0;
  const char* text;

  memset(&id, 0, sizeof(id));
  Check(config.size == sizeof(ncclConfig_t), "config.size");
  Check(config.magic == 0xcafebeef, "config.magic");
  Check(config.version == NCCL_VERSION_CODE, "config.version");
  Check(config.blocking == NCCL_CONFIG_UNDEF_INT && config.nvlinkCentricSched == NCCL_CONFIG_UNDEF_INT,
        "config int fields undefined");
  Check(config.netName == NULL && config.commName == NULL, "config pointer fields undefined");
  Check(config.graphUsageMode == NCCL_CONFIG_UNDEF_INT && config.nvlsHostMode == NCCL_CONFIG_UNDEF_INT,
        "config 2.29-2.31 fields undefined");
  {
    ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
    Check(cc.size == sizeof(ncclCollConfig_t) && cc.magic == 0xcafebeef && cc.version == NCCL_VERSION_CODE,
          "collconfig header");
    Check(cc.ext == NULL && cc.algSelection == NULL && cc.minCTAs == NCCL_CONFIG_UNDEF_INT &&
              cc.CTAPolicy == NCCL_CONFIG_UNDEF_INT && cc.forceAlgSelection == 1 && cc.userProfilerTag == 0,
          "collconfig fields");
  }
  Check(sim.size == sizeof(ncclSimInfo_t) && sim.magic == 0x74685283u, "sim info header");
  Check(sim.estimatedTime == NCCL_UNDEF_FLOAT, "sim info estimatedTime undefined");
  Check(comm == NULL && win == NULL && stream == NULL, "handles");
  Check(op == 4 && type == 9 && residence == 1 && ncclFloat8e5m2 == 11, "enum values");
  Check(NCCL_SPLIT_NOCOLOR == -1 && NCCL_WIN_COLL_SYMMETRIC == 1 && NCCL_CTA_POLICY_ZERO == 2 &&
            NCCL_SHRINK_ABORT == 1 && NCCL_REVOKE_DEFAULT == 0 && NCCL_WIN_REQUIRED_ALIGNMENT == 4096,
        "flag macros");
  Check(strcmp(NCCL_SUFFIX, "") == 0, "NCCL_SUFFIX");

  result = ncclGetVersion(&version);
  Check(result == ncclSuccess, "ncclGetVersion returns ncclSuccess");
  Check(version == NCCL_VERSION_CODE, "ncclGetVersion reports NCCL_VERSION_CODE");
  text = ncclGetErrorString(ncclInvalidArgument);
  Check(text != NULL && text[0] != '\0', "ncclGetErrorString gives a message");

  printf("nccl.h as C99 (CUDA headers %s): library version %d, header %d\n",
         BRAID_NCCL_CUDA_HEADERS ? "included" : "not included", version, NCCL_VERSION_CODE);
  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  return 0;
}
