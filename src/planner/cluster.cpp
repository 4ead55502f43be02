// A cluster as the planner sees it, and its JSON profile: what `./dev bench calibrate` measures on
// this machine (bench/calibrate.sh), or what a datasheet gives for another cluster.
//
//   {"name": "...", "hosts": 2, "ranks_per_host": 4, "memory": "host" | "cuda",
//    "device_memory_bytes": 0, "host_memory_bytes": 25769803776, "cores_per_host": 2,
//    "intra": {"latency_s": 2e-6, "bandwidth_Bps": 8e9, "small_latency_s": 5e-7, "crowded_Bps": 5e9},
//    "inter": {"latency_s": 6e-5, "bandwidth_Bps": 1.25e8, "single_flow_Bps": 6e7},
//    "update": {"bandwidth_Bps": 1.8e10, "host_bandwidth_Bps": 2.4e10, "gpu_bandwidth_Bps": 0},
//    "pcie": {"latency_s": 1e-5, "bandwidth_Bps": 2.5e10}}
// Fields left out keep the defaults of Cluster (calibrate.sh also writes the levels it measured
// under "measured", which the planner does not read).
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "shardopt/error.hpp"
#include "shardopt/planner.hpp"

namespace shardopt::planner {
namespace {

using nlohmann::json;

double number(const json &j, const char *key, double fallback) {
    if (!j.contains(key)) return fallback;
    require(j.at(key).is_number(), ErrorCode::invalid_argument, std::string("cluster profile: \"") + key + "\" must be a number");
    return j.at(key).get<double>();
}

Link link(const json &j, const char *key, Link fallback) {
    if (!j.contains(key)) return fallback;
    const json &l = j.at(key);
    require(l.is_object(), ErrorCode::invalid_argument, std::string("cluster profile: \"") + key + "\" must be an object");
    return Link{number(l, "latency_s", fallback.latency), number(l, "bandwidth_Bps", fallback.bandwidth),
                number(l, "single_flow_Bps", fallback.single_flow_bandwidth),
                number(l, "small_latency_s", fallback.small_latency),
                number(l, "crowded_Bps", fallback.crowded_bandwidth)};
}

json link_json(const Link &l) {
    return json{{"latency_s", l.latency},
                {"bandwidth_Bps", l.bandwidth},
                {"single_flow_Bps", l.single_flow_bandwidth},
                {"small_latency_s", l.small_latency},
                {"crowded_Bps", l.crowded_bandwidth}};
}

void positive(double v, const std::string &what) {
    require(std::isfinite(v) && v > 0.0, ErrorCode::invalid_argument, what + " must be > 0 (got " + std::to_string(v) + ")");
}
void not_negative(double v, const std::string &what) {
    require(std::isfinite(v) && v >= 0.0, ErrorCode::invalid_argument, what + " must be >= 0 (got " + std::to_string(v) + ")");
}

} // namespace

void validate_cluster(const Cluster &c) {
    require(c.hosts >= 1, ErrorCode::invalid_argument, "hosts must be >= 1 (got " + std::to_string(c.hosts) + ")");
    require(c.ranks_per_host >= 1, ErrorCode::invalid_argument,
            "ranks (GPUs) per host must be >= 1 (got " + std::to_string(c.ranks_per_host) + ")");
    require(double(c.hosts) * c.ranks_per_host <= 1e6, ErrorCode::invalid_argument, "more than a million ranks");
    require(c.memory == MemorySpace::host || c.memory == MemorySpace::cuda, ErrorCode::invalid_argument,
            "memory must be host or cuda");
    if (c.ranks_per_host > 1) {
        positive(c.intra.bandwidth, "the bandwidth between ranks of a host (intra)");
        not_negative(c.intra.latency, "the latency between ranks of a host (intra)");
        not_negative(c.intra.crowded_bandwidth, "the bandwidth between ranks of a crowded host (intra crowded_Bps)");
    }
    if (c.hosts > 1) {
        positive(c.inter.bandwidth, "the bandwidth between hosts (inter)");
        not_negative(c.inter.latency, "the latency between hosts (inter)");
    }
    if (c.memory == MemorySpace::cuda) {
        positive(double(c.device_memory), "the memory of a GPU (device memory)");
        positive(c.gpu_update_bandwidth, "the GPU's update bandwidth");
    }
    positive(c.update_bandwidth, "the CPU update bandwidth of a rank");
    not_negative(c.host_update_bandwidth, "the CPU update bandwidth of a host");
    require(c.cores_per_host >= 0, ErrorCode::invalid_argument, "cores per host must be >= 0");
}

Cluster cluster_from_json(const std::string &text) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception &e) {
        throw Error(ErrorCode::invalid_argument, std::string("cluster profile: not JSON: ") + e.what());
    }
    require(j.is_object(), ErrorCode::invalid_argument, "cluster profile: a JSON object expected");
    Cluster c;
    if (j.contains("name") && j.at("name").is_string()) c.name = j.at("name").get<std::string>();
    c.hosts = int(number(j, "hosts", c.hosts));
    c.ranks_per_host = int(number(j, "ranks_per_host", c.ranks_per_host));
    if (j.contains("memory")) {
        const std::string m = j.at("memory").is_string() ? j.at("memory").get<std::string>() : "";
        require(m == "host" || m == "cuda", ErrorCode::invalid_argument,
                "cluster profile: \"memory\" must be \"host\" or \"cuda\"");
        c.memory = m == "cuda" ? MemorySpace::cuda : MemorySpace::host;
    }
    c.device_memory = std::uint64_t(number(j, "device_memory_bytes", double(c.device_memory)));
    c.host_memory = std::uint64_t(number(j, "host_memory_bytes", double(c.host_memory)));
    c.cores_per_host = int(number(j, "cores_per_host", c.cores_per_host));
    c.intra = link(j, "intra", c.intra);
    c.inter = link(j, "inter", c.inter);
    c.pcie = link(j, "pcie", c.pcie);
    if (j.contains("update")) {
        const json &u = j.at("update");
        c.update_bandwidth = number(u, "bandwidth_Bps", c.update_bandwidth);
        c.host_update_bandwidth = number(u, "host_bandwidth_Bps", c.host_update_bandwidth);
        c.gpu_update_bandwidth = number(u, "gpu_bandwidth_Bps", c.gpu_update_bandwidth);
    }
    return c;
}

std::string cluster_to_json(const Cluster &c) {
    json j{{"name", c.name},
           {"hosts", c.hosts},
           {"ranks_per_host", c.ranks_per_host},
           {"memory", c.memory == MemorySpace::cuda ? "cuda" : "host"},
           {"device_memory_bytes", c.device_memory},
           {"host_memory_bytes", c.host_memory},
           {"cores_per_host", c.cores_per_host},
           {"intra", link_json(c.intra)},
           {"inter", link_json(c.inter)},
           {"pcie", link_json(c.pcie)},
           {"update",
            {{"bandwidth_Bps", c.update_bandwidth},
             {"host_bandwidth_Bps", c.host_update_bandwidth},
             {"gpu_bandwidth_Bps", c.gpu_update_bandwidth}}}};
    return j.dump(2);
}

} // namespace shardopt::planner
