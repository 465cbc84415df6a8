// NCCL_IB_HCA: which HCAs and ports the IB network uses. Syntax (NCCL's): a comma list of hca[:port] entries,
// prefix-matched unless the list starts with '='; a leading '^' excludes the listed ones instead. "mlx5" takes
// mlx5_0, mlx5_1, ...; "=mlx5_0:1" only port 1 of mlx5_0; "^mlx5_1" all but mlx5_1. Pure functions, tested
// without an RDMA device.
#pragma once

#include <string>
#include <vector>

#include "src/common/status.h"

namespace braid {
namespace net {
namespace ib {

struct IbHcaEntry {
  std::string name;
  int port = -1;  // -1: any port
};

struct IbHcaSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<IbHcaEntry> entries;  // empty: everything matches
};

// Errors name the text: "NCCL_IB_HCA=\"mlx5_0:x\": port \"x\" is not a number in 1..255".
[[nodiscard]] Result<IbHcaSpec> parseIbHca(const std::string& text);

// True when (device, port) is selected by spec.
bool matchIbHca(const IbHcaSpec& spec, const std::string& device, int port);

}  // namespace ib
}  // namespace net
}  // namespace braid
