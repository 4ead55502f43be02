// The test hooks as the shipped library has them: disarmed for good. The library's code calls
// the same hook points in every build; only these definitions differ from the test build's
// (stop_at.cpp, checkpoint_delay.cpp), so no environment variable of the tests ever changes
// what a user's process does.
#include "checkpoint/atomic_file.hpp"
#if defined(SHARDOPT_HAVE_UCX)
#include "comm/ucx/test_hook.hpp"
#endif

namespace shardopt {

namespace checkpoint {
void test_delay_point() {}
} // namespace checkpoint

#if defined(SHARDOPT_HAVE_UCX)
namespace ucx::test_hook {
std::atomic<int> armed_point{none};
void reached(Point, std::uint64_t) {}
} // namespace ucx::test_hook
#endif

} // namespace shardopt
