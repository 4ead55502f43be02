// Experimental: in-process groups joined by name (shardopt_comm_create_inprocess_member). A
// process-wide registry maps a group id to the handles of its ranks not yet claimed; the group is
// forgotten once every rank has claimed its handle.
#include <map>
#include <mutex>
#include <vector>

#include "capi_internal.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace {

struct Group {
    std::vector<CommunicatorPtr> unclaimed; // null once claimed
    int claimed = 0;
};

struct Registry {
    std::mutex mutex;
    std::map<std::string, Group> groups;
};

Registry &registry() {
    static Registry *r = new Registry; // never destroyed: claims may come while the process exits
    return *r;
}

} // namespace

extern "C" {

SHARDOPT_API shardopt_status shardopt_comm_create_inprocess_member(const char *group_id, int rank, int size,
                                                                   shardopt_comm *out) {
    return guard(__func__, [&] {
        not_null(group_id, "group_id");
        not_null(out, "out");
        require(size >= 1, ErrorCode::invalid_argument, "size must be >= 1, got " + std::to_string(size));
        require(rank >= 0 && rank < size, ErrorCode::invalid_argument,
                "rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(size) + ")");
        const std::string id = group_id;
        std::unique_ptr<shardopt_comm_s> h(new shardopt_comm_s);
        Registry &r = registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        auto it = r.groups.find(id);
        if (it == r.groups.end()) {
            Group g;
            g.unclaimed = make_inprocess_group(size);
            it = r.groups.emplace(id, std::move(g)).first;
        }
        Group &g = it->second;
        const int group_size = int(g.unclaimed.size());
        require(group_size == size, ErrorCode::invalid_argument,
                "in-process group '" + id + "' has size " + std::to_string(group_size) + ", not " +
                    std::to_string(size));
        require(g.unclaimed[std::size_t(rank)] != nullptr, ErrorCode::invalid_argument,
                "rank " + std::to_string(rank) + " of in-process group '" + id + "' was already claimed");
        h->comm = std::move(g.unclaimed[std::size_t(rank)]);
        g.unclaimed[std::size_t(rank)] = nullptr;
        if (++g.claimed == group_size) r.groups.erase(it); // every rank has its handle: the id is free
        *out = h.release();
    });
}

} // extern "C"
