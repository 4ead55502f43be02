// The CUDA space in a build without CUDA (SHARDOPT_WITH_CUDA=OFF, or no toolkit found): the
// entry point exists, so the engine compiles the same everywhere, and says why it cannot run.
#include "cuda_space.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {

std::unique_ptr<Space> make_cuda_space(const Communicator &, cuda::Stream, int) {
    throw Error(ErrorCode::unsupported,
                "shardopt was built without CUDA (SHARDOPT_WITH_CUDA=OFF or no CUDA toolkit was found at configure "
                "time): the CUDA device space is not available");
}

} // namespace shardopt::engine
