// The PowerSGD reducer (Vogels et al. 2019, as PyTorch's powerSGD_hook): each matrix tensor M
// (plus its error-feedback residual) is approximated by P Q^T of rank r. P = M Q is averaged
// over the group, orthogonalized, then Q = M^T P is averaged, and every rank uses P Q^T; Q is
// kept as the next step's starting point (warm start). Tensors that are not matrices, or too
// small to gain, are averaged uncompressed in the same allreduce as the P's.
#pragma once

#include "compressed_reducer.hpp"

namespace shardopt::compression {

std::unique_ptr<CompressedReducer> make_power_sgd_reducer(CommunicatorPtr comm, const ParameterSet &layout,
                                                          const CompressionOptions &options, ReduceMode mode);

// Whether PowerSGD compresses tensor t of `layout` under `options` (a declared matrix, big
// enough, and rank below both dimensions).
// What its state_bytes() is once every bucket was reduced (either mode: the reduce-scatter keeps
// only its chunk of the same reconstruction).
std::size_t power_sgd_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options);

bool power_sgd_compresses(const TensorLayout &tensor, const CompressionOptions &options);

} // namespace shardopt::compression
