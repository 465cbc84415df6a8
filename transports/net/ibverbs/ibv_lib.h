// libibverbs, loaded at run time (src/common/dyn_lib.h explains why and how). The IB network calls the functions
// libibverbs exports through this table; everything else in <infiniband/verbs.h> (ibv_post_send, ibv_poll_cq, ...)
// is static inline over the context's ops and is called directly.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "src/common/status.h"

namespace braid {
namespace net {
namespace ib {

struct IbvLib {
  decltype(&::ibv_get_device_list) getDeviceList = nullptr;
  decltype(&::ibv_free_device_list) freeDeviceList = nullptr;
  decltype(&::ibv_get_device_name) getDeviceName = nullptr;
  decltype(&::ibv_get_device_guid) getDeviceGuid = nullptr;
  decltype(&::ibv_open_device) openDevice = nullptr;
  decltype(&::ibv_close_device) closeDevice = nullptr;
  decltype(&::ibv_query_device) queryDevice = nullptr;
  // The exported (compat) ibv_query_port; use queryPort() below, which prefers the context's extended op as the
  // header's ibv_query_port macro does.
  decltype(&::ibv_query_port) queryPortCompat = nullptr;
  decltype(&::ibv_query_gid) queryGid = nullptr;
  decltype(&::ibv_alloc_pd) allocPd = nullptr;
  // The exported ibv_reg_mr (the header's ibv_reg_mr macro calls it for access flags without
  // IBV_ACCESS_OPTIONAL_RANGE, the only ones braid uses).
  decltype(&::ibv_reg_mr) regMr = nullptr;
  decltype(&::ibv_reg_dmabuf_mr) regDmabufMr = nullptr;  // null when libibverbs predates it (rdma-core < 34)
  decltype(&::ibv_dereg_mr) deregMr = nullptr;
  decltype(&::ibv_create_cq) createCq = nullptr;
  decltype(&::ibv_destroy_cq) destroyCq = nullptr;
  decltype(&::ibv_create_qp) createQp = nullptr;
  decltype(&::ibv_modify_qp) modifyQp = nullptr;
  decltype(&::ibv_destroy_qp) destroyQp = nullptr;
  decltype(&::ibv_wc_status_str) wcStatusStr = nullptr;
  std::string name;                     // what was dlopen()ed
  std::vector<std::string> notDefault;  // see DynLib::notDefault()
};

// Loads the library named by BRAID_IBVERBS_LIB (default libibverbs.so.1) and resolves the table, on the first
// call; later calls return the same table or the same error (the parameter is read once). Thread-safe. Error
// (kSystemError): the library could not be loaded or lacks a symbol, naming both and dlerror().
[[nodiscard]] Result<const IbvLib*> loadIbvLib();

// ibv_query_port through the table (port_attr is cleared first).
int queryPort(const IbvLib& lib, ibv_context* ctx, uint8_t port, ibv_port_attr* attr);

}  // namespace ib
}  // namespace net
}  // namespace braid
