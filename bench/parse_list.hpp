// "16,64,256" -> {16, 64, 256}: the list arguments of the benchmark drivers.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace shardopt::bench {

inline std::vector<long> parse_list(const std::string &s) {
    std::vector<long> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) out.push_back(std::stol(item));
    return out;
}

} // namespace shardopt::bench
