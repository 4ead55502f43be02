#define BOOST_TEST_MODULE shardopt pipeline
#include <boost/test/unit_test.hpp>
