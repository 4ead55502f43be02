// optimize(): the training loop with a C model callback.
#include <algorithm>

#include "capi_internal.hpp"
#include "options_convert.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace {
// What the model callback on this thread said about its failure (shardopt_model_error).
thread_local std::string model_error_message;
} // namespace

std::string shardopt::capi::take_model_error() {
    std::string message;
    message.swap(model_error_message);
    return message;
}

extern "C" {

SHARDOPT_API void shardopt_model_error(const char *message) {
    try {
        model_error_message = message ? message : "";
    } catch (...) { // out of memory: the failure is still reported, without its reason
    }
}

SHARDOPT_API shardopt_status shardopt_optimizer_optimize(shardopt_optimizer opt, shardopt_model_fn model,
                                                         void *user_data, const shardopt_optimize_options *options,
                                                         shardopt_optimize_result *result) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        require(model != nullptr, ErrorCode::invalid_argument, "model is NULL");
        const OptimizeOptions oo = optimize_options_from(options);
        const std::size_t elements = o.layout().element_count();
        shardopt_optimize_result out{};
        if (result) {
            check_out_struct(result, "optimize result");
            const std::size_t have = std::min(result->struct_size, sizeof out);
            std::memcpy(static_cast<void *>(&out), result, have);
            require(out.best_parameters_count == 0 || out.best_parameters_count == elements,
                    ErrorCode::invalid_argument,
                    "best_parameters_count is " + std::to_string(out.best_parameters_count) + " but the model has " +
                        std::to_string(elements) + " parameters");
            require(out.best_parameters == nullptr || out.best_parameters_count != 0, ErrorCode::invalid_argument,
                    "best_parameters is set but best_parameters_count is 0");
        }
        // A failing callback aborts the optimizer's communicator, so the peers stop too.
        Communicator &world = o.communicator();
        ModelFunction fn = [&](const void *params, void *grad, const std::int64_t *samples, std::size_t n) {
            double loss = 0.0;
            model_error_message.clear();
            const int rc = model(user_data, params, grad, samples, n, &loss);
            if (rc != 0) {
                // The abort carries this to every rank: their errors name the rank and reason.
                std::string why = "model callback returned " + std::to_string(rc) + " on rank " +
                                  std::to_string(world.rank());
                if (!model_error_message.empty()) why += ": " + model_error_message;
                model_error_message.clear();
                world.abort(why, ErrorCode::invalid_state);
                throw Error(ErrorCode::invalid_state, why);
            }
            return loss;
        };
        struct InOptimize { // set for the loop's duration, cleared however it ends
            shardopt_optimizer_s *h;
            explicit InOptimize(shardopt_optimizer_s *handle) : h(handle) { h->in_optimize = true; }
            ~InOptimize() { h->in_optimize = false; }
        } in_optimize(opt);
        const OptimizeResult r = opt->elastic ? opt->elastic->optimize(fn, oo) : o.optimize(fn, oo);
        if (!result) return;
        if (out.best_parameters && !r.best_parameters.empty())
            std::memcpy(out.best_parameters, r.best_parameters.data(), r.best_parameters.size());
        if (out.loss_history)
            std::copy_n(r.loss_history.begin(), std::min(r.loss_history.size(), out.loss_history_capacity),
                        out.loss_history);
        out.loss_history_count = r.loss_history.size();
        out.best_loss = r.best_loss;
        out.iterations = r.iterations;
        out.stopped_early = r.stopped_early;
        write_struct(result, out, "optimize result");
    });
}

} // extern "C"
