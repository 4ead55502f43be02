// Bootstrap: how a process learns its rank, the world size and where the rendezvous master is.
//
// Read from the environment, first match wins per field:
//   rank        SHARDOPT_RANK, RANK (torchrun), OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID
//   world size  SHARDOPT_WORLD_SIZE, WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS
//   local rank  SHARDOPT_LOCAL_RANK, LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID
//   master      SHARDOPT_MASTER_ADDR / MASTER_ADDR (default 127.0.0.1),
//               SHARDOPT_MASTER_PORT / MASTER_PORT (default 29500)
//   bind        SHARDOPT_BIND_ADDR: where rank 0 listens (default: the master address)
//   token       SHARDOPT_JOB_TOKEN: checked on every join (default: under torchrun its
//               TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT, else empty)
//   timeout     SHARDOPT_BOOTSTRAP_TIMEOUT_MS, else SHARDOPT_TIMEOUT_MS, else 5 minutes
#pragma once

#include <chrono>
#include <string>

namespace shardopt {

struct BootstrapConfig {
    int rank = 0;
    int world_size = 1;
    int local_rank = -1;                 // -1: unknown
    std::string master_addr = "127.0.0.1";
    int master_port = 29500;
    std::string bind_addr;               // empty: master_addr
    std::string job_token;
    std::chrono::milliseconds timeout{std::chrono::minutes(5)}; // rendezvous and communicator

    // Reads the variables above; throws Error(invalid_argument) on malformed values
    // (non-numbers, rank outside [0, world_size), a port outside 1..65535).
    static BootstrapConfig from_env();
    // True when any rank/world-size variable of a known launcher is set.
    static bool env_has_world();
    // Throws Error(invalid_argument) when a field is out of range.
    void validate() const;
};

} // namespace shardopt
