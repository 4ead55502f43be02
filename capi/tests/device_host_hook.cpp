// The one thing test_capi_device_host changes in the C ABI: a shardopt_device_optimizer whose
// "device" is host memory (the engine's host space, src/sharding/device/host_space.hpp) instead
// of CUDA's, so every shardopt_device_optimizer_* function runs its shipped code on a machine
// without a GPU, and the pointers it returns can be read and written by the test.
#include "capi_internal.hpp"
#include "optimizer_ops.hpp"
#include "sharding/device/host_space.hpp"

using namespace shardopt;
using namespace shardopt::capi;

extern "C" shardopt_status test_device_optimizer_create_on_host(shardopt_comm comm, shardopt_params params,
                                                                const shardopt_optimizer_options *optimizer,
                                                                const shardopt_sharding_options *sharding,
                                                                const void *initial, shardopt_device_optimizer *out) {
    return guard(__func__, [&] {
        const ops::CreateArgs a = ops::create_args(comm, params, optimizer, sharding, out);
        std::unique_ptr<shardopt_device_optimizer_s> h(new shardopt_device_optimizer_s);
        h->comm = a.comm.shared_from_this();
        h->opt = cuda::ShardedDeviceOptimizer::create_in(device::make_host_space(), h->comm, a.layout, a.optimizer,
                                                         a.sharding, initial);
        *out = h.release();
    });
}
