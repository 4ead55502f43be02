// Parameter sets: shardopt_params_*.
#include "capi_internal.hpp"
#include "options_convert.hpp"

using namespace shardopt;
using namespace shardopt::capi;

extern "C" {

SHARDOPT_API shardopt_status shardopt_params_create(shardopt_dtype dtype, size_t bucket_bytes, shardopt_params *out) {
    return guard(__func__, [&] {
        not_null(out, "out");
        const DType d = dtype_arg(dtype);
        *out = new shardopt_params_s(ParameterSet(d, bucket_bytes ? bucket_bytes : ParameterSet::kDefaultBucketBytes));
    });
}

SHARDOPT_API shardopt_status shardopt_params_destroy(shardopt_params params) {
    return guard(__func__, [&] { destroy(params, HandleTag::params, "parameter set"); });
}

SHARDOPT_API shardopt_status shardopt_params_add(shardopt_params params, const char *name, size_t count,
                                                 int tp_replicated, int *index) {
    return guard(__func__, [&] {
        ParameterSet &set = params_of(params);
        not_null(name, "name");
        const int i = set.add(name, count, tp_replicated != 0);
        if (index) *index = i;
    });
}

SHARDOPT_API shardopt_status shardopt_params_add_matrix(shardopt_params params, const char *name, size_t rows,
                                                        size_t cols, int tp_replicated, int *index) {
    return guard(__func__, [&] {
        ParameterSet &set = params_of(params);
        not_null(name, "name");
        const int i = set.add_matrix(name, rows, cols, tp_replicated != 0);
        if (index) *index = i;
    });
}

SHARDOPT_API shardopt_status shardopt_params_end_bucket(shardopt_params params) {
    return guard(__func__, [&] { params_of(params).end_bucket(); });
}

SHARDOPT_API shardopt_status shardopt_params_tensor_count(shardopt_params params, int *count) {
    return guard(__func__, [&] {
        ParameterSet &set = params_of(params);
        not_null(count, "count");
        *count = set.tensor_count();
    });
}

SHARDOPT_API shardopt_status shardopt_params_element_count(shardopt_params params, size_t *count) {
    return guard(__func__, [&] {
        ParameterSet &set = params_of(params);
        not_null(count, "count");
        std::size_t n = 0;
        for (const auto &t : set.tensors()) n += t.count;
        *count = n;
    });
}

SHARDOPT_API shardopt_status shardopt_params_check_array(shardopt_params params, const char *what,
                                                         shardopt_dtype dtype, size_t count, size_t need) {
    return guard(__func__, [&] {
        const ParameterSet &set = params_of(params);
        std::size_t n = 0;
        for (const auto &t : set.tensors()) n += t.count;
        array_arg(set, what, dtype, count, need ? need : n);
    });
}

SHARDOPT_API shardopt_status shardopt_params_padded_count(shardopt_params params, int shards, size_t *count) {
    return guard(__func__, [&] {
        ParameterSet copy = params_of(params);
        not_null(count, "count");
        require(shards >= 1, ErrorCode::invalid_argument, "shards must be >= 1, got " + std::to_string(shards));
        copy.plan(shards);
        *count = copy.padded_count();
    });
}

SHARDOPT_API shardopt_status shardopt_params_padded_count_for(shardopt_params params,
                                                              const shardopt_sharding_options *sharding, int shards,
                                                              size_t *count) {
    return guard(__func__, [&] {
        ParameterSet copy = params_of(params);
        not_null(count, "count");
        require(shards >= 1, ErrorCode::invalid_argument, "shards must be >= 1, got " + std::to_string(shards));
        if (sharding) copy = bucketed_layout(std::move(copy), sharding_options_from(sharding));
        copy.plan(shards);
        *count = copy.padded_count();
    });
}

} // extern "C"
