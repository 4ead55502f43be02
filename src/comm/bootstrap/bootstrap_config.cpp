// BootstrapConfig::from_env: the launcher-specific environment names, mapped to one struct.
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

#include "shardopt/bootstrap.hpp"
#include "shardopt/error.hpp"

namespace shardopt {
namespace {

// First variable of `names` that is set (and non-empty); null when none is.
const char *first_env(std::initializer_list<const char *> names, const char **which) {
    for (const char *name : names) {
        const char *value = std::getenv(name);
        if (value && *value) {
            if (which) *which = name;
            return value;
        }
    }
    return nullptr;
}

long long parse_int(const char *name, const char *text) {
    errno = 0;
    char *end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    require(end != text && *end == '\0' && errno == 0, ErrorCode::invalid_argument,
            std::string("bootstrap: ") + name + "='" + text + "' is not an integer");
    return v;
}

bool int_from(std::initializer_list<const char *> names, long long &out) {
    const char *which = nullptr;
    const char *value = first_env(names, &which);
    if (!value) return false;
    out = parse_int(which, value);
    return true;
}

} // namespace

bool BootstrapConfig::env_has_world() {
    return first_env({"SHARDOPT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"},
                     nullptr) != nullptr;
}

BootstrapConfig BootstrapConfig::from_env() {
    BootstrapConfig c;
    long long v = 0;
    if (int_from({"SHARDOPT_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, v)) c.rank = int(v);
    if (int_from({"SHARDOPT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, v))
        c.world_size = int(v);
    if (int_from({"SHARDOPT_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, v))
        c.local_rank = int(v);
    if (const char *a = first_env({"SHARDOPT_MASTER_ADDR", "MASTER_ADDR"}, nullptr)) c.master_addr = a;
    if (int_from({"SHARDOPT_MASTER_PORT", "MASTER_PORT"}, v)) c.master_port = int(v);
    if (const char *b = first_env({"SHARDOPT_BIND_ADDR"}, nullptr)) c.bind_addr = b;
    if (const char *t = std::getenv("SHARDOPT_JOB_TOKEN")) c.job_token = t;
    else if (const char *run = first_env({"TORCHELASTIC_RUN_ID"}, nullptr)) {
        // torchrun: its run id and restart count, so a worker of a group torchrun stopped (a stale
        // process of an earlier restart) cannot join the group it restarted
        const char *restart = first_env({"TORCHELASTIC_RESTART_COUNT"}, nullptr);
        c.job_token = std::string("torchrun:") + run + ":" + (restart ? restart : "0");
    }
    if (int_from({"SHARDOPT_BOOTSTRAP_TIMEOUT_MS", "SHARDOPT_TIMEOUT_MS"}, v)) {
        require(v > 0, ErrorCode::invalid_argument, "bootstrap: timeout must be positive");
        c.timeout = std::chrono::milliseconds(v);
    }
    c.validate();
    return c;
}

void BootstrapConfig::validate() const {
    require(world_size >= 1, ErrorCode::invalid_argument,
            "bootstrap: world size " + std::to_string(world_size) + " must be at least 1");
    require(rank >= 0 && rank < world_size, ErrorCode::invalid_argument,
            "bootstrap: rank " + std::to_string(rank) + " outside [0, " + std::to_string(world_size) + ")");
    require(master_port >= 1 && master_port <= 65535, ErrorCode::invalid_argument,
            "bootstrap: master port " + std::to_string(master_port) + " outside 1..65535");
    require(!master_addr.empty(), ErrorCode::invalid_argument, "bootstrap: empty master address");
    require(timeout.count() > 0, ErrorCode::invalid_argument, "bootstrap: timeout must be positive");
}

} // namespace shardopt
