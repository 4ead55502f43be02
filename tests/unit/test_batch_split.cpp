// batch_slice: the slices partition the batch, and the weighted average of the ranks' means is
// the batch mean (what makes data-parallel training equal single-process training).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"

using namespace shardopt;

BOOST_AUTO_TEST_SUITE(batch_split)

BOOST_AUTO_TEST_CASE(slices_partition_the_batch_evenly) {
    for (std::int64_t count : {0, 1, 7, 100, 101})
        for (int ranks : {1, 2, 3, 8}) {
            std::int64_t next = 5, smallest = count, largest = 0;
            for (int r = 0; r < ranks; ++r) {
                const BatchSlice s = batch_slice(5, count, r, ranks);
                BOOST_TEST(s.begin == next);
                BOOST_TEST(s.end >= s.begin);
                BOOST_TEST(s.indices().size() == std::size_t(s.size()));
                next = s.end;
                smallest = std::min(smallest, s.size());
                largest = std::max(largest, s.size());
            }
            BOOST_TEST(next == 5 + count);
            BOOST_TEST(largest - smallest <= 1);
        }
}

BOOST_AUTO_TEST_CASE(weighted_rank_means_average_to_the_batch_mean) {
    for (std::int64_t count : {1, 7, 100, 101})
        for (int ranks : {1, 2, 3, 8}) {
            auto value = [](std::int64_t i) { return double(i * i) + 0.5; };
            double batch_mean = 0.0;
            for (std::int64_t i = 0; i < count; ++i) batch_mean += value(i);
            batch_mean /= double(count);
            double average = 0.0;
            for (int r = 0; r < ranks; ++r) {
                const BatchSlice s = batch_slice(0, count, r, ranks);
                double mean = 0.0;
                for (std::int64_t i : s.indices()) mean += value(i);
                if (s.size() > 0) mean /= double(s.size());
                average += s.weight * mean;
            }
            average /= ranks;
            BOOST_TEST(std::abs(average - batch_mean) <= 1e-12 * batch_mean, "count " << count << " ranks " << ranks);
        }
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_refused) {
    auto refusal = [](auto fn) -> std::string {
        try {
            fn();
        } catch (const Error &e) {
            return e.code() == ErrorCode::invalid_argument ? e.what() : "wrong code";
        }
        return "no error";
    };
    const std::string negative = refusal([] { batch_slice(0, -1, 0, 2); });
    BOOST_TEST(negative.find("negative batch size") != std::string::npos, negative);
    const std::string past_end = refusal([] { batch_slice(0, 10, 2, 2); });
    BOOST_TEST(past_end.find("rank 2 out of range for 2 ranks") != std::string::npos, past_end);
    const std::string no_ranks = refusal([] { batch_slice(0, 10, 0, 0); });
    BOOST_TEST(no_ranks.find("out of range for 0 ranks") != std::string::npos, no_ranks);
}

BOOST_AUTO_TEST_SUITE_END()
