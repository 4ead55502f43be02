#define BOOST_TEST_MODULE shardopt equivalence
#include <boost/test/unit_test.hpp>
