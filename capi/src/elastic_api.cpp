// Elastic training through the C ABI: an optimizer handle made elastic keeps its ElasticOptimizer
// beside the ShardedOptimizer; step and optimize (optimizer_api.cpp, optimize_api.cpp) go through
// it from then on.
#include <cstddef>

#include "capi_internal.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace {

constexpr std::size_t kMinElasticOptions = offsetof(shardopt_elastic_options, min_workers) + sizeof(std::int32_t);

shardopt_elastic_options elastic_defaults(std::size_t struct_size) {
    const ElasticOptions d;
    shardopt_elastic_options c{};
    c.struct_size = struct_size;
    c.min_workers = d.min_workers;
    c.max_workers = d.max_workers;
    c.checkpoint_every = d.checkpoint_every; // 0: the environment, else 100
    c.checkpoint_dir = nullptr;
    return c;
}

ElasticOptions elastic_options_from(const shardopt_elastic_options *user) {
    const auto c = read_struct(user, "elastic options", kMinElasticOptions);
    const ElasticOptions d;
    ElasticOptions o;
    o.min_workers = c.min_workers != 0 ? c.min_workers : d.min_workers;
    o.max_workers = c.max_workers != 0 ? c.max_workers : d.max_workers;
    o.checkpoint_every = c.checkpoint_every;
    if (c.checkpoint_dir) o.checkpoint_dir = c.checkpoint_dir;
    return o;
}

ElasticOptimizer &elastic_of(shardopt_optimizer opt, bool query) {
    if (query) opt_query_of(opt);
    else opt_of(opt);
    require(opt->elastic != nullptr, ErrorCode::invalid_state,
            "the optimizer is not elastic (shardopt_optimizer_make_elastic)");
    return *opt->elastic;
}

} // namespace

extern "C" {

SHARDOPT_API shardopt_status shardopt_elastic_options_init_sized(shardopt_elastic_options *opts, size_t struct_size) {
    return guard(__func__, [&] {
        not_null(opts, "elastic options");
        require(struct_size >= kMinElasticOptions, ErrorCode::invalid_argument,
                "elastic options: struct_size " + std::to_string(struct_size) + " is too small");
        const shardopt_elastic_options full = elastic_defaults(struct_size);
        std::memcpy(static_cast<void *>(opts), &full, struct_size < sizeof full ? struct_size : sizeof full);
    });
}

SHARDOPT_API shardopt_status shardopt_elastic_options_validate(const shardopt_elastic_options *opts) {
    return guard(__func__, [&] { elastic_options_from(opts).validate(); });
}

SHARDOPT_API shardopt_status shardopt_elastic_options_validate_strict(const shardopt_elastic_options *opts) {
    return guard(__func__, [&] {
        elastic_options_from(opts).validate();
        const auto c = read_struct(opts, "elastic options", kMinElasticOptions);
        const ElasticOptions d;
        require_set(c, offsetof(shardopt_elastic_options, min_workers), c.min_workers, std::to_string(d.min_workers),
                    "elastic options", "min_workers");
        require_set(c, offsetof(shardopt_elastic_options, max_workers), c.max_workers, std::to_string(d.max_workers),
                    "elastic options", "max_workers");
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_make_elastic(shardopt_optimizer opt,
                                                             const shardopt_elastic_options *options) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        require(opt->elastic == nullptr, ErrorCode::invalid_state, "the optimizer is already elastic");
        const ElasticOptions e = elastic_options_from(options);
        opt->elastic = std::make_unique<ElasticOptimizer>(o, e);
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_elastic_status(shardopt_optimizer opt,
                                                               shardopt_elastic_status *status) {
    return guard(__func__, [&] {
        const ElasticOptimizer &e = elastic_of(opt, true);
        not_null(status, "status");
        check_out_struct(status, "elastic status");
        const ElasticStats st = e.stats();
        shardopt_elastic_status c{};
        c.resumed_step = e.resumed_step();
        c.last_checkpoint_step = e.last_checkpoint_step();
        c.checkpoint_pending = e.checkpoint_pending() ? 1 : 0;
        c.generation = e.generation();
        c.min_workers = e.options().min_workers;
        c.max_workers = e.options().max_workers;
        c.checkpoint_every = e.options().checkpoint_every;
        c.checkpoints_published = st.checkpoints_published;
        c.snapshot_seconds = st.snapshot_seconds;
        c.write_seconds = st.write_seconds;
        c.publish_seconds = st.publish_seconds;
        c.snapshot_bytes = st.snapshot_bytes;
        c.checkpoint_dir = e.options().checkpoint_dir.c_str();
        write_struct(status, c, "elastic status");
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_checkpoint_now(shardopt_optimizer opt) {
    return guard(__func__, [&] { elastic_of(opt, false).checkpoint(); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_finish_checkpoint(shardopt_optimizer opt) {
    return guard(__func__, [&] { elastic_of(opt, false).finish_checkpoint(); });
}

} // extern "C"
