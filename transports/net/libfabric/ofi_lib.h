// libfabric, loaded at run time (src/common/dyn_lib.h explains why and how). The OFI network calls the functions
// libfabric exports through this table; fi_domain, fi_endpoint, fi_tsend, fi_cq_read and the rest of the
// <rdma/fi_*.h> API are static inline over the objects' ops and are called directly.
#pragma once

#include <rdma/fabric.h>

#include <string>
#include <vector>

#include "src/common/status.h"

namespace braid {
namespace net {
namespace ofi {

struct OfiLib {
  decltype(&::fi_getinfo) getInfo = nullptr;
  decltype(&::fi_freeinfo) freeInfo = nullptr;
  decltype(&::fi_dupinfo) dupInfo = nullptr;  // also fi_allocinfo(), which the header defines as fi_dupinfo(NULL)
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strError = nullptr;
  decltype(&::fi_version) version = nullptr;
  std::string name;                     // what was dlopen()ed
  std::vector<std::string> notDefault;  // see DynLib::notDefault()
};

// Loads the library named by BRAID_LIBFABRIC_LIB (default libfabric.so.1) and resolves the table, on the first
// call; later calls return the same table or the same error (the parameter is read once). Thread-safe. Error
// (kSystemError): the library could not be loaded or lacks a symbol, naming both and dlerror().
[[nodiscard]] Result<const OfiLib*> loadOfiLib();

// loadOfiLib()'s table, or null when libfabric could not be loaded. Devices (hence endpoints) exist only when it
// loaded, so code past init may use it unchecked.
const OfiLib* ofiLib();

}  // namespace ofi
}  // namespace net
}  // namespace braid
