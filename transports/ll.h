// The LL protocol's line format and operations live with the host+device code that runs them
// (src/backends/common/ll_ops.h); transports and tests include them from here.
#pragma once

#include "src/backends/common/ll_ops.h"
