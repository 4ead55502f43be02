// shardopt dtypes and reduce ops in NCCL's terms (every one has a native NCCL counterpart).
#pragma once

#include <nccl.h>

#include "shardopt/types.hpp"

namespace shardopt::nccl {

ncclDataType_t to_nccl(DType dtype);
ncclRedOp_t to_nccl(ReduceOp op);

} // namespace shardopt::nccl
