#include "host_layout.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace shardopt::ucx {
namespace {

std::uint64_t fnv1a(const std::string &s, std::uint64_t h = 1469598103934665603ull) {
    for (const unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

std::string first_line(const char *path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

} // namespace

std::uint64_t this_host_key() {
    if (const char *id = std::getenv("SHARDOPT_HOST_ID"); id && *id) return fnv1a(std::string("id:") + id);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    char net[128] = {};
    const ssize_t n = readlink("/proc/self/ns/net", net, sizeof net - 1);
    if (n > 0) net[n] = '\0';
    return fnv1a(std::string(host) + '\n' + first_line("/proc/sys/kernel/random/boot_id") + '\n' + net);
}

HostLayout::HostLayout(const std::vector<std::uint64_t> &keys)
    : host_of(keys.size(), -1), local_rank_of(keys.size(), 0) {
    std::vector<std::uint64_t> host_keys;
    for (std::size_t r = 0; r < keys.size(); ++r) {
        std::size_t h = 0;
        while (h < host_keys.size() && host_keys[h] != keys[r]) ++h;
        if (h == host_keys.size()) {
            host_keys.push_back(keys[r]);
            members.emplace_back();
        }
        host_of[r] = int(h);
        local_rank_of[r] = int(members[h].size());
        members[h].push_back(int(r));
    }
}

bool HostLayout::uniform() const {
    for (const auto &m : members)
        if (m.size() != members.front().size()) return false;
    return true;
}

} // namespace shardopt::ucx
