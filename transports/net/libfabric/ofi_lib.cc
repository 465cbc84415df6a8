#include "transports/net/libfabric/ofi_lib.h"

#include "src/common/dyn_lib.h"
#include "src/common/params.h"

namespace braid {
namespace net {
namespace ofi {

namespace {

// The versions a program linked against libfabric 1.17's headers binds (objdump -T): fi_info's current layout is
// FABRIC_1.3's.
Status bindAll(DynLib& dl, OfiLib* t) {
  BRAID_RETURN_IF_ERROR(dl.bind(t->getInfo, "fi_getinfo", "FABRIC_1.3"));
  BRAID_RETURN_IF_ERROR(dl.bind(t->freeInfo, "fi_freeinfo", "FABRIC_1.3"));
  BRAID_RETURN_IF_ERROR(dl.bind(t->dupInfo, "fi_dupinfo", "FABRIC_1.3"));
  BRAID_RETURN_IF_ERROR(dl.bind(t->fabric, "fi_fabric", "FABRIC_1.1"));
  BRAID_RETURN_IF_ERROR(dl.bind(t->strError, "fi_strerror", "FABRIC_1.0"));
  BRAID_RETURN_IF_ERROR(dl.bind(t->version, "fi_version", "FABRIC_1.0"));
  return Status::ok();
}

}  // namespace

Result<const OfiLib*> loadOfiLib() {
  return loadTableOnce<OfiLib>(params::LibfabricLib(), bindAll);
}

const OfiLib* ofiLib() {
  const Result<const OfiLib*> r = loadOfiLib();
  return r.isOk() ? r.value() : nullptr;
}

}  // namespace ofi
}  // namespace net
}  // namespace braid
