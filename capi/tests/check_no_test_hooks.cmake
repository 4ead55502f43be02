# The shipped library holds none of the test hooks (src/test_hooks): no environment variable of
# the tests can change what a user's process does. Run as
#   cmake -DLIBRARY=<libshardopt.so> -P check_no_test_hooks.cmake
file(STRINGS "${LIBRARY}" found REGEX "SHARDOPT_TEST_STOP_AT|SHARDOPT_CHECKPOINT_TEST_DELAY_MS|SHARDOPT_CHECKPOINT_TEST_KILL_AT")
if(found)
  message(FATAL_ERROR "${LIBRARY} reads a test hook's variable: ${found}")
endif()
message(STATUS "${LIBRARY}: no test hooks")
