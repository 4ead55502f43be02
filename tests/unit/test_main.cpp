#define BOOST_TEST_MODULE shardopt unit
#include <boost/test/unit_test.hpp>
