// The training loop through the C ABI: train() (the policy every binding calls) and optimize()
// (its first form), with C callbacks. A failing callback aborts the optimizer's communicator, so
// every rank fails at once, naming the rank and the callback's reason.
#include <algorithm>
#include <cmath>

#include "capi_internal.hpp"
#include "options_convert.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace {
// What the callback on this thread said about its failure (shardopt_model_error).
thread_local std::string model_error_message;

// A callback's non-zero return as the error every rank reports: this rank's is thrown here, the
// peers get it through the abort.
[[noreturn]] void callback_failed(Communicator &world, const char *what, int rc) {
    std::string why = std::string(what) + " returned " + std::to_string(rc) + " on rank " + std::to_string(world.rank());
    if (!model_error_message.empty()) why += ": " + model_error_message;
    model_error_message.clear();
    world.abort(why, ErrorCode::invalid_state);
    throw Error(ErrorCode::invalid_state, why);
}

template <typename T> std::size_t copy_history(const std::vector<double> &from, double *to, std::size_t capacity) {
    if (to) std::copy_n(from.begin(), std::min(from.size(), capacity), to);
    return from.size();
}

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

SHARDOPT_API shardopt_status shardopt_optimizer_train(shardopt_optimizer opt, shardopt_batch_fn model,
                                                      void *user_data, const shardopt_training_options *options,
                                                      shardopt_training_result *result) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        require(model != nullptr, ErrorCode::invalid_argument, "model is NULL");
        Communicator &world = o.communicator();
        TrainingOptions to = training_options_from(options, [&world](int rc) {
            callback_failed(world, "the learning-rate callback", rc);
        });
        const std::size_t elements = o.layout().element_count();
        shardopt_training_result out{};
        if (result) {
            check_out_struct(result, "training result");
            std::memcpy(static_cast<void *>(&out), result, std::min(result->struct_size, sizeof out));
            require(out.best_parameters_count == 0 || out.best_parameters_count == elements,
                    ErrorCode::invalid_argument,
                    "best_parameters_count is " + std::to_string(out.best_parameters_count) + " but the model has " +
                        std::to_string(elements) + " parameters");
            require(out.best_parameters == nullptr || out.best_parameters_count != 0, ErrorCode::invalid_argument,
                    "best_parameters is set but best_parameters_count is 0");
        }
        BatchFunction fn = [&](const Batch &b) {
            shardopt_batch cb{};
            cb.struct_size = sizeof cb;
            cb.dataset = shardopt_dataset(int(b.dataset));
            cb.params = b.params;
            cb.grad = b.grad;
            cb.samples = b.samples;
            cb.sample_count = b.sample_count;
            cb.epoch = b.epoch;
            cb.step = b.step;
            cb.on_device = b.on_device;
            cb.device = b.device;
            cb.cuda_stream = b.cuda_stream;
            double loss = 0.0;
            model_error_message.clear();
            const int rc = model(user_data, &cb, &loss);
            if (rc != 0) callback_failed(world, "model callback", rc);
            return loss;
        };
        BusyCall call(opt, false);
        TrainingResult r = opt->elastic ? opt->elastic->train(fn, to) : o.train(fn, to);
        if (!result) return;
        if (out.best_parameters) std::memcpy(out.best_parameters, r.best_parameters.data(), r.best_parameters.size());
        copy_history<double>(r.training_loss_history, out.training_loss_history, out.history_capacity);
        copy_history<double>(r.validation_loss_history, out.validation_loss_history, out.history_capacity);
        copy_history<double>(r.learning_rate_history, out.learning_rate_history, out.history_capacity);
        out.epochs = r.epochs;
        out.steps = r.steps;
        out.best_epoch = r.best_epoch;
        out.best_score = r.best_score;
        out.stopped_early = r.stopped_early;
        out.training_loss = r.training_loss;
        out.validation_loss = r.validation_loss;
        out.test_loss = r.test_loss;
        write_struct(result, out, "training result");
    });
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
            std::memcpy(static_cast<void *>(&out), result, std::min(result->struct_size, sizeof out));
            require(out.best_parameters_count == 0 || out.best_parameters_count == elements,
                    ErrorCode::invalid_argument,
                    "best_parameters_count is " + std::to_string(out.best_parameters_count) + " but the model has " +
                        std::to_string(elements) + " parameters");
            require(out.best_parameters == nullptr || out.best_parameters_count != 0, ErrorCode::invalid_argument,
                    "best_parameters is set but best_parameters_count is 0");
        }
        Communicator &world = o.communicator();
        ModelFunction fn = [&](const void *params, void *grad, const std::int64_t *samples, std::size_t n) {
            double loss = 0.0;
            model_error_message.clear();
            const int rc = model(user_data, params, grad, samples, n, &loss);
            if (rc != 0) callback_failed(world, "model callback", rc);
            return loss;
        };
        BusyCall call(opt, false);
        const OptimizeResult r = opt->elastic ? opt->elastic->optimize(fn, oo) : o.optimize(fn, oo);
        if (!result) return;
        if (out.best_parameters && !r.best_parameters.empty())
            std::memcpy(out.best_parameters, r.best_parameters.data(), r.best_parameters.size());
        out.loss_history_count = copy_history<double>(r.loss_history, out.loss_history, out.loss_history_capacity);
        out.best_loss = r.best_loss;
        out.iterations = r.iterations;
        out.stopped_early = r.stopped_early;
        write_struct(result, out, "optimize result");
    });
}

} // extern "C"
