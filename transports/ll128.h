// The LL128 protocol's line format and host reference live with the host+device code
// (src/backends/common/ll128_ops.h); transports and tests include them from here.
#pragma once

#include "src/backends/common/ll128_ops.h"
