// HostLayout: which ranks of a communicator share a host, and the hierarchy built on it.
//
// A host is what lets ranks share memory: the same kernel (boot id and host name) and the same
// network namespace, so ranks in separate network namespaces (containers, the `hosts` tests'
// namespaces) count as separate hosts even where /dev/shm is shared. SHARDOPT_HOST_ID, when set,
// replaces all of that (for launchers that know better).
//
// Hosts are numbered by their lowest rank, and a rank's local rank is its position among the
// ranks of its host in rank order, so every rank derives the same layout from the same keys.
#pragma once

#include <cstdint>
#include <vector>

namespace shardopt::ucx {

// This process's host key (a hash of what identifies its host, see above).
std::uint64_t this_host_key();

struct HostLayout {
    std::vector<int> host_of;              // rank -> host index
    std::vector<int> local_rank_of;        // rank -> its position among its host's ranks
    std::vector<std::vector<int>> members; // host index -> its ranks, ascending

    explicit HostLayout(const std::vector<std::uint64_t> &keys);
    int hosts() const { return int(members.size()); }
    // Every host holds the same number of ranks (what the sliced hierarchical algorithms need).
    bool uniform() const;
    // The rank that is local rank `local` of host `host`.
    int rank_at(int host, int local) const { return members[std::size_t(host)][std::size_t(local)]; }
};

} // namespace shardopt::ucx
