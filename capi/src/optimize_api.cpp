// optimize(): the training loop with a C model callback (body in optimizer_ops.hpp).
#include "capi_internal.hpp"
#include "optimizer_ops.hpp"

using namespace shardopt;
using namespace shardopt::capi;

extern "C" {

SHARDOPT_API shardopt_status shardopt_optimizer_optimize(shardopt_optimizer opt, shardopt_model_fn model,
                                                         void *user_data, const shardopt_optimize_options *options,
                                                         shardopt_optimize_result *result) {
    return guard(__func__, [&] {
        auto &o = opt_of(opt);
        ops::optimize(o, o.communicator(), model, user_data, options, result);
    });
}

} // extern "C"
