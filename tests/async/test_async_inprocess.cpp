// Asynchronous SGD on in-process ranks: staleness 0 is DDP bit for bit; with a rank slowed down,
// the staleness bound holds, the others run ahead and training still converges; misuse and
// failures are errors on every rank, never hangs.
#define BOOST_TEST_MODULE shardopt async sgd
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include "async_training.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;
using namespace shardopt::testing;
namespace bdata = boost::unit_test::data;

namespace shardopt { // data test cases print their parameters
inline std::ostream &operator<<(std::ostream &out, OptimizerKind k) { return out << optimizer_kind_name(k); }
inline std::ostream &operator<<(std::ostream &out, DType d) { return out << dtype_name(d); }
} // namespace shardopt

namespace {

AsyncTraining setup_of(Strategy strategy, int staleness, OptimizerKind kind, DType dtype) {
    AsyncTraining s;
    s.strategy = strategy;
    s.staleness = staleness;
    s.optimizer = kind;
    s.lr = kind == OptimizerKind::sgd ? 0.1 : 3e-3;
    s.dtype = dtype;
    return s;
}

} // namespace

// Same batches, same sums in rank order, same division, same update: the same bits, on every
// rank, for each optimizer and dtype, over several shuffled epochs; the loss history too.
BOOST_DATA_TEST_CASE(staleness_0_is_ddp_bit_for_bit,
                     bdata::make({OptimizerKind::sgd, OptimizerKind::adam}) * bdata::make({DType::f32, DType::f64}) *
                         bdata::make({3, 4}),
                     kind, dtype, ranks) {
    const auto ddp = train_mlp_inprocess(ranks, setup_of(Strategy::ddp, 0, kind, dtype));
    const auto async = train_mlp_inprocess(ranks, setup_of(Strategy::async_sgd, 0, kind, dtype));
    BOOST_TEST(ddp[0].optimize.loss_history.back() < ddp[0].optimize.loss_history.front(), "training moved");
    for (int r = 0; r < ranks; ++r) {
        BOOST_TEST(async[r].bytes == ddp[0].bytes, "rank " << r << " ends with DDP's parameters, bit for bit");
        BOOST_TEST(async[r].optimize.loss_history == ddp[0].optimize.loss_history, "rank " << r << "'s loss history");
        BOOST_TEST(async[r].optimize.iterations == ddp[0].optimize.iterations);
        BOOST_TEST(async[r].stats.late_gradients == 0);
        BOOST_TEST(async[r].stats.max_staleness == 0);
        BOOST_TEST(async[r].stats.steps == ddp[0].optimize.iterations, "one step per clock");
    }
}

BOOST_AUTO_TEST_CASE(calibrate_straggler, *boost::unit_test::disabled()) {
    for (int s : {0, 4}) {
        AsyncTraining t = setup_of(s == 0 ? Strategy::ddp : Strategy::async_sgd, s, OptimizerKind::adam, DType::f32);
        t.samples = 4096;
        t.batch = 512;
        t.epochs = 4;
        t.slow_rank = 3;
        const auto r = train_mlp_inprocess(4, t);
        for (int k = 0; k < 4; ++k)
            BOOST_TEST_MESSAGE("s=" << s << " rank " << k << " calls " << r[k].model_calls << " secs " << r[k].seconds
                               << " steps/s " << r[k].model_calls / r[k].seconds << " final loss " << r[k].final_loss
                               << " late " << r[k].stats.late_gradients << " maxst " << r[k].stats.max_staleness
                               << " lead " << r[k].stats.max_lead << " ownlead " << r[k].stats.max_own_lead
                               << " skipped " << r[k].stats.skipped_clocks << " model s " << r[k].stats.model_seconds
                               << " wait s " << r[k].stats.wait_seconds);
    }
}
