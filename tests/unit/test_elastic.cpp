// AsyncCheckpoint (ShardedOptimizer::save_async) and ElasticOptimizer on in-process ranks: the
// asynchronous save publishes what save() does, only once every rank polled it complete; a failed
// write fails every rank; an elastic job resumes at another world size as a plain save/load does,
// and an unpublished checkpoint is never resumed from. (The TSan build runs these too: the
// writer threads against the training thread.)
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "sharding_test_support.hpp"
#include "shardopt/elastic.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::expect_error;
using shardopt::testing::with;

namespace {

ParameterSet layout() {
    ParameterSet l(DType::f32, 4096);
    l.add("w", 3000);
    l.add("b", 37);
    l.add("v", 1500);
    return l;
}

std::vector<float> initial() {
    std::vector<float> v(layout().element_count());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i % 13) * 0.1f;
    return v;
}

// Step s: a gradient that depends on the step, the element and the world size only.
void train(ShardedOptimizer &opt, std::int64_t first, std::int64_t last, ElasticOptimizer *elastic = nullptr) {
    for (std::int64_t s = first; s < last; ++s) {
        opt.zero_grad();
        for (int b = opt.layout().bucket_count() - 1; b >= 0; --b) {
            auto *g = static_cast<float *>(opt.bucket_grad(b));
            for (std::size_t i = 0; i < opt.layout().bucket(b).count; ++i)
                g[i] = 0.01f * float((s * 7 + std::int64_t(i) + b) % 11 - 5) * float(opt.world_size());
            opt.grad_ready(b);
        }
        if (elastic) elastic->step();
        else opt.step();
    }
}

std::unique_ptr<ShardedOptimizer> adam(Communicator &comm, Strategy s) {
    auto init = initial();
    return ShardedOptimizer::create(comm.shared_from_this(), layout(), OptimizerOptions::defaults(OptimizerKind::adam),
                                    with(s), init.data());
}

std::vector<float> params_of(ShardedOptimizer &opt) {
    std::vector<float> p(opt.layout().element_count());
    opt.get_parameters(p.data());
    return p;
}

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/shardopt-unit-elastic-XXXXXX";
        BOOST_REQUIRE(mkdtemp(t) != nullptr);
        path = t;
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(async_checkpoint)

BOOST_AUTO_TEST_CASE(publishes_what_save_does_once_complete) {
    TempDir tmp;
    const std::string async_dir = tmp.path + "/async", sync_dir = tmp.path + "/sync";
    for (Strategy s : {Strategy::zero2, Strategy::fsdp}) {
        run_inprocess(4, [&](Communicator &comm) {
            auto opt = adam(comm, s);
            train(*opt, 0, 3);
            opt->save(sync_dir);
            auto pending = opt->save_async(async_dir);
            const std::vector<float> at_snapshot = params_of(*opt);
            train(*opt, 3, 5); // the snapshot is of step 3, whatever the steps after it change
            bool complete = false;
            for (int polls = 0; polls < 100000 && !complete; ++polls) complete = pending->poll();
            {
                std::lock_guard<std::mutex> lock(assertion_mutex());
                BOOST_TEST(complete);
                BOOST_TEST(pending->complete());
                BOOST_TEST(pending->step_count() == 3);
                BOOST_TEST(pending->snapshot_bytes() > 0u);
            }
            pending->finish(); // complete: nothing left to do, no collective
            const bool again = pending->poll();
            // Loaded into fresh optimizers at another world size's worth of strategy: both the same.
            auto a = adam(comm, Strategy::ddp), b = adam(comm, Strategy::ddp);
            a->load(async_dir);
            b->load(sync_dir);
            train(*a, 3, 6);
            train(*b, 3, 6);
            const bool same = params_of(*a) == params_of(*b);
            const bool moved_on = at_snapshot != params_of(*opt); // collective under FSDP: outside the lock
            std::lock_guard<std::mutex> lock(assertion_mutex());
            BOOST_TEST(again);
            BOOST_TEST(a->step_count() == 6);
            BOOST_TEST(same);
            BOOST_TEST(moved_on);
        });
    }
}

BOOST_AUTO_TEST_CASE(a_failed_write_fails_every_rank) {
    run_inprocess(3, [&](Communicator &comm) {
        auto opt = adam(comm, Strategy::zero2);
        train(*opt, 0, 2);
        // /proc/self exists, and nobody can create files in it.
        auto pending = opt->save_async("/proc/self");
        expect_error(ErrorCode::io, "/proc/self", [&] { pending->finish(); });
        expect_error(ErrorCode::invalid_state, "failed", [&] { pending->poll(); });
        train(*opt, 2, 3); // the optimizer goes on
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(!pending->complete());
        BOOST_TEST(opt->step_count() == 3);
    });
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(elastic_optimizer)

BOOST_AUTO_TEST_CASE(resumes_at_another_world_size_as_a_plain_switch) {
    TempDir tmp;
    const std::string dir = tmp.path + "/elastic", reference = tmp.path + "/reference";
    ElasticOptions options;
    options.min_workers = 2;
    options.max_workers = 4;
    options.checkpoint_every = 3;
    options.checkpoint_dir = dir;
    run_inprocess(4, [&](Communicator &comm) {
        auto plain = adam(comm, Strategy::zero2);
        auto e = ElasticOptimizer::create(comm.shared_from_this(), layout(),
                                          OptimizerOptions::defaults(OptimizerKind::adam), with(Strategy::zero2), options,
                                          initial().data());
        train(e->wrapped(), 0, 7, e.get()); // checkpoints at 3 and 6
        train(*plain, 0, 6);
        plain->save(reference);
        e->finish_checkpoint();
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(e->resumed_step() == -1);
        BOOST_TEST(e->last_checkpoint_step() == 6);
        BOOST_TEST(e->stats().checkpoints_published == 2);
    });
    std::vector<std::vector<float>> got(3), want(3);
    run_inprocess(3, [&](Communicator &comm) {
        auto plain = adam(comm, Strategy::zero2);
        plain->load(reference);
        auto wrapped = adam(comm, Strategy::zero2);
        ElasticOptimizer e(*wrapped, options); // wraps an optimizer it does not own
        {
            std::lock_guard<std::mutex> lock(assertion_mutex());
            BOOST_TEST(e.resumed_step() == 6);
            BOOST_TEST(wrapped->step_count() == 6);
        }
        train(*wrapped, 6, 10, &e);
        train(*plain, 6, 10);
        e.finish_checkpoint();
        got[std::size_t(comm.rank())] = params_of(*wrapped);
        want[std::size_t(comm.rank())] = params_of(*plain);
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(e.last_checkpoint_step() == 9);
    });
    BOOST_TEST(got == want);
}

BOOST_AUTO_TEST_CASE(an_unpublished_checkpoint_is_never_resumed_from) {
    TempDir tmp;
    ElasticOptions options;
    options.checkpoint_every = 2;
    options.checkpoint_dir = tmp.path;
    run_inprocess(2, [&](Communicator &comm) {
        auto wrapped = adam(comm, Strategy::fsdp);
        ElasticOptimizer e(*wrapped, options);
        train(*wrapped, 0, 3, &e); // the checkpoint of step 2 is published by now, or finished next
        e.finish_checkpoint();
        train(*wrapped, 3, 4, &e); // step 4: a snapshot taken, its files written, never polled
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(e.checkpoint_pending());
        BOOST_TEST(e.last_checkpoint_step() == 2);
    }); // destroyed unpublished
    run_inprocess(2, [&](Communicator &comm) {
        auto wrapped = adam(comm, Strategy::fsdp);
        ElasticOptimizer e(*wrapped, options);
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(e.resumed_step() == 2);
    });
}

BOOST_AUTO_TEST_CASE(errors) {
    TempDir tmp;
    run_inprocess(2, [&](Communicator &comm) {
        auto wrapped = adam(comm, Strategy::ddp);
        ElasticOptions o;
        o.checkpoint_dir = tmp.path;
        o.min_workers = 3;
        o.max_workers = 4;
        expect_error(ErrorCode::invalid_state, "the world has 2 ranks, outside [minWorkers 3, maxWorkers 4]",
                     [&] { ElasticOptimizer e(*wrapped, o); });
        o.min_workers = 0;
        expect_error(ErrorCode::invalid_argument, "minWorkers is 0", [&] { ElasticOptimizer e(*wrapped, o); });
        o.min_workers = 2;
        o.max_workers = 1;
        expect_error(ErrorCode::invalid_argument, "maxWorkers 1 is below minWorkers 2",
                     [&] { ElasticOptimizer e(*wrapped, o); });
        o.max_workers = 2;
        o.checkpoint_every = -3;
        expect_error(ErrorCode::invalid_argument, "checkpoint_every is -3", [&] { ElasticOptimizer e(*wrapped, o); });
    });
    // A checkpoint of another model in the directory: every rank fails, naming the difference.
    run_inprocess(2, [&](Communicator &comm) {
        auto other = adam(comm, Strategy::ddp);
        other->save(tmp.path);
        ParameterSet l(DType::f32);
        l.add("w", 10);
        auto wrapped = ShardedOptimizer::create(comm.shared_from_this(), l,
                                                OptimizerOptions::defaults(OptimizerKind::adam), with(Strategy::ddp));
        ElasticOptions o;
        o.checkpoint_dir = tmp.path;
        expect_error(ErrorCode::invalid_argument, "tensor", [&] { ElasticOptimizer e(*wrapped, o); });
    });
}

BOOST_AUTO_TEST_SUITE_END()
