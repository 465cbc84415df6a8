#include "transports/net/ibverbs/ibv_lib.h"

#include <cstring>

#include "src/common/dyn_lib.h"
#include "src/common/params.h"

namespace braid {
namespace net {
namespace ib {

namespace {

// The versions a program linked against this rdma-core's headers binds (objdump -T): IBVERBS_1.1 for the verbs
// that had a 1.0 variant, the version that introduced the rest.
constexpr const char* kV11 = "IBVERBS_1.1";

Status bindAll(DynLib& dl, IbvLib* t) {
  BRAID_RETURN_IF_ERROR(dl.bind(t->getDeviceList, "ibv_get_device_list", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->freeDeviceList, "ibv_free_device_list", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->getDeviceName, "ibv_get_device_name", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->getDeviceGuid, "ibv_get_device_guid", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->openDevice, "ibv_open_device", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->closeDevice, "ibv_close_device", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->queryDevice, "ibv_query_device", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->queryPortCompat, "ibv_query_port", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->queryGid, "ibv_query_gid", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->allocPd, "ibv_alloc_pd", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->regMr, "ibv_reg_mr", kV11));
  dl.bindOptional(t->regDmabufMr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
  BRAID_RETURN_IF_ERROR(dl.bind(t->deregMr, "ibv_dereg_mr", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->createCq, "ibv_create_cq", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->destroyCq, "ibv_destroy_cq", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->createQp, "ibv_create_qp", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->modifyQp, "ibv_modify_qp", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->destroyQp, "ibv_destroy_qp", kV11));
  BRAID_RETURN_IF_ERROR(dl.bind(t->wcStatusStr, "ibv_wc_status_str", kV11));
  return Status::ok();
}

}  // namespace

Result<const IbvLib*> loadIbvLib() {
  return loadTableOnce<IbvLib>(params::IbverbsLib(), bindAll);
}

int queryPort(const IbvLib& lib, ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  memset(attr, 0, sizeof(*attr));
  // Current libibverbs gives every context the extended query_port op, which takes the caller's struct size.
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx != nullptr) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  return lib.queryPortCompat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

}  // namespace ib
}  // namespace net
}  // namespace braid
