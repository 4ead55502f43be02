// The chunk methods' reducer for ranks on several hosts (the same number L >= 2 on each of
// H >= 2 hosts): a host's ranks combine their gradients first, uncompressed, through the host's
// own memory, so only one compressed copy of each chunk crosses a host's link in each phase.
//
//   phase one  1. host reduce-scatter (sum, local-rank order): local rank l gets the host's
//                 partial sum of the H chunks owned by local rank l of every host;
//              2. local rank l compresses each of them (error feedback on the host sum) and
//                 sends chunk j's payload to its owner j over the "cross" group of local rank l;
//              3. owner j sums the H decoded payloads in host order and averages.
//   phase two  (allreduce) the owner compresses its chunk once more (its own residual), the
//              cross group allgathers the payloads, the host allgathers them, and every rank
//              decodes the same bytes.
//
// Per host, each phase moves (H-1)/H of the bucket's compressed bytes over the link, where the
// flat reducer moves L times that in phase one. The order of every sum is fixed by the layout of
// ranks on hosts, so runs repeat bit for bit and every rank ends with the same bits. The bucket
// is scratch (its chunks are reordered in place while phase one runs).
#pragma once

#include <vector>

#include "compressed_reducer.hpp"

namespace shardopt::compression {

// The hosts as ranks ascending per host, when the layout suits the hierarchical reducer (at
// least 2 hosts with the same number, at least 2, of ranks each); empty otherwise.
std::vector<std::vector<int>> hierarchical_hosts(const std::vector<int> &host_of_ranks);

// comm: the reducer's own communicator; hosts: hierarchical_hosts of its host_of_ranks (not
// empty). Collective over comm (it splits the host and cross communicators off it).
std::unique_ptr<CompressedReducer> make_hierarchical_chunked_reducer(CommunicatorPtr comm, std::vector<std::vector<int>> hosts,
                                                                     const ParameterSet &layout,
                                                                     const CompressionOptions &options, ReduceMode mode);
// What its state_bytes() is once every bucket was reduced (layout: planned for the group).
std::size_t hierarchical_chunked_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options,
                                               ReduceMode mode, const std::vector<std::vector<int>> &hosts);

} // namespace shardopt::compression
