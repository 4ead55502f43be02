// shardopt.h must compile as C++ too (this file) as well as C99 (the other test files).
#include "shardopt.h"

#include <type_traits>

static_assert(std::is_pointer<shardopt_comm>::value, "handles are opaque pointers");
static_assert(sizeof(shardopt_status) == sizeof(int), "shardopt_status is int-sized");

extern "C" int header_compiles_as_cxx(void) {
    shardopt_optimizer_options o;
    return shardopt_optimizer_options_init(&o) == SHARDOPT_OK ? SHARDOPT_ABI_VERSION : -1;
}
