// create_communicator_from_env: picks a backend by name or from the launcher's environment.
#include <cstdlib>

#include "shardopt/gpu_comm.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/ucx.hpp"

namespace shardopt {

bool ucx_available() noexcept {
#ifdef SHARDOPT_HAVE_UCX
    return true;
#else
    return false;
#endif
}

#ifndef SHARDOPT_HAVE_UCX
CommunicatorPtr create_ucx_communicator(const BootstrapConfig &) {
    throw Error(ErrorCode::unsupported, "this shardopt was built without UCX (install libucx-dev and rebuild)");
}
#endif

CommunicatorPtr create_communicator_from_env(const std::string &backend) {
    std::string name = backend;
    if (name.empty())
        if (const char *env = std::getenv("SHARDOPT_BACKEND")) name = env;
    if (name.empty()) name = BootstrapConfig::env_has_world() ? "ucx" : "inprocess";
    if (name == "ucx") {
        // Without a launcher's environment every process would quietly be rank 0 of a world of
        // one: a job of N unconnected copies. A world of one must be asked for.
        require(BootstrapConfig::env_has_world(), ErrorCode::invalid_argument,
                "backend 'ucx' found no world size in the environment (SHARDOPT_WORLD_SIZE, WORLD_SIZE, "
                "OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS): start the processes with tools/shardopt-run, "
                "torchrun, mpirun or srun, or set SHARDOPT_WORLD_SIZE=1 for a single-process world");
        return create_ucx_communicator(BootstrapConfig::from_env());
    }
    // Device buffers: chosen by name only, never as a fallback for one another or for ucx.
    if (name == "nccl") return gpu::create_nccl_communicator(BootstrapConfig::from_env());
    if (name == "staged") return gpu::create_staged_communicator(BootstrapConfig::from_env());
    if (name == "inprocess") {
        const BootstrapConfig c = BootstrapConfig::from_env();
        require(c.world_size == 1, ErrorCode::invalid_argument,
                "backend 'inprocess' from the environment is a group of one; world size " +
                    std::to_string(c.world_size) + " needs the 'ucx' backend (or make_inprocess_group)");
        return make_inprocess_group(1)[0];
    }
    throw Error(ErrorCode::unsupported, "unknown or unavailable backend '" + name + "' (known: ucx, inprocess, nccl, staged)");
}

} // namespace shardopt
