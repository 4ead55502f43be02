// shardopt.h must compile as C++ too (this file) as well as C99 (the other test files). Included
// twice: first the stable part only, then again with SHARDOPT_EXPERIMENTAL, which must still
// declare the experimental part (its guard is its own, as zstd's static-linking-only section).
#include "shardopt.h"
#ifdef SHARDOPT_H_EXPERIMENTAL
#error "the experimental part is declared without SHARDOPT_EXPERIMENTAL"
#endif
#define SHARDOPT_EXPERIMENTAL
#include "shardopt.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

static_assert(std::is_pointer<shardopt_comm>::value, "handles are opaque pointers");
static_assert(sizeof(shardopt_status) == sizeof(int), "shardopt_status is int-sized");
// Enum fields of the options structs are int-sized, as the bindings' layouts assume.
static_assert(sizeof(shardopt_switch) == sizeof(std::int32_t) && sizeof(shardopt_memory_space) == sizeof(std::int32_t),
              "switches and memory spaces are int-sized");
// field_mask comes right after struct_size.
static_assert(offsetof(shardopt_optimizer_options, field_mask) == sizeof(size_t), "field_mask follows struct_size");
static_assert(std::is_same<decltype(&shardopt_comm_create_inprocess_member),
                           shardopt_status (*)(const char *, int, int, shardopt_comm *)>::value,
              "the experimental part is declared after a second inclusion");

extern "C" int header_compiles_as_cxx(void) {
    shardopt_optimizer_options o;
    return shardopt_optimizer_options_init(&o) == SHARDOPT_OK ? SHARDOPT_ABI_VERSION : -1;
}
