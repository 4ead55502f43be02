// ZeRO-Offload without a GPU: the schedule's decisions (which copy happens when, what is where),
// the plan's checks and byte counts, and the step engine running offloaded on a device space
// emulated in host memory whose copies land only when waited for (emulated_device_space.hpp).
// Offloaded training must equal the same engine without offload and ShardedOptimizer in host
// memory bit for bit, for DDP, ZeRO-1, ZeRO-2 and FSDP; in host memory the flags change nothing.
// The CUDA space itself runs offloaded on the CUDA stand-in (tests/gpu/offload_main.cpp).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "emulated_device_space.hpp"
#include "sharding/engine/step_engine.hpp"
#include "sharding/offload/offload_plan.hpp"
#include "sharding/offload/offload_schedule.hpp"
#include "sharding/strategies/strategy_plan.hpp"
#include "sharding_test_support.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::EmulatedDeviceSpace;
using shardopt::testing::expect_error;
using shardopt::testing::gradient;
using shardopt::testing::initial_values;
using shardopt::testing::TraceEvent;
using shardopt::testing::with;
using Kind = OffloadOp::Kind;

namespace {

std::string ops(const std::vector<OffloadOp> &v) { return to_string(v); }

// --- the engine on the emulated device ---------------------------------------------------------

// Three buckets of odd sizes; the last one so small that at 4 ranks some own none of it.
ParameterSet offload_layout() {
    ParameterSet layout(DType::f32, 2048);
    layout.add("w1", 301);
    layout.add("b1", 17);
    layout.add("w2", 130);
    layout.end_bucket();
    layout.add("w3", 64);
    layout.add("b3", 5);
    layout.end_bucket();
    layout.add("tiny", 3);
    return layout;
}

std::size_t offload_elements() {
    ParameterSet layout = offload_layout();
    layout.plan(1);
    return layout.element_count();
}

struct Config {
    std::string name;
    int ranks;
    ShardingOptions sharding;
    OptimizerOptions optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
    int nonfinite_step = -1;
};

ShardingOptions offloaded(ShardingOptions o, bool gradients, bool params) {
    o.cpu_offload_optimizer = true;
    o.cpu_offload_gradients = gradients;
    o.cpu_offload_params = params;
    return o;
}

// One step of the protocol from the packed parameters (units gathered around their use).
template <typename Opt> StepResult train_step(Opt &opt, const std::vector<float> &packed, int rank, int step, const Config &c) {
    const ParameterSet &layout = opt.layout();
    opt.zero_grad();
    for (int b = layout.bucket_count() - 1; b >= 0; --b) {
        opt.gather(b);
        const auto &bl = layout.bucket(b);
        std::size_t packed_offset = 0;
        for (int t = 0; t < bl.first_tensor; ++t) packed_offset += layout.tensor(t).count;
        std::vector<float> g(bl.padded, 0.0f);
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const auto &tl = layout.tensor(t);
            for (std::size_t i = 0; i < tl.count; ++i)
                g[tl.offset - bl.offset + i] = gradient(packed[packed_offset + i], packed_offset + i, rank, step);
            packed_offset += tl.count;
        }
        if (step == c.nonfinite_step && rank == 0 && b == 0) g[0] = std::numeric_limits<float>::quiet_NaN();
        // Through the optimizer's memory ("device" memory for the engine: copy_from_host-like).
        std::memcpy(opt.bucket_grad(b), g.data(), bl.count * sizeof(float));
        opt.grad_ready(b);
        opt.release(b);
    }
    return opt.step();
}

std::unique_ptr<engine::StepEngine> emulated_engine(Communicator &comm, const Config &c, const ShardingOptions &o,
                                                    const float *initial, EmulatedDeviceSpace **space_out) {
    auto space = std::make_unique<EmulatedDeviceSpace>();
    if (space_out) *space_out = space.get();
    return std::make_unique<engine::StepEngine>(std::move(space), comm.shared_from_this(), offload_layout(), c.optimizer,
                                                o, initial);
}

// The three runs of one configuration on one rank: in host memory (ShardedOptimizer), on the
// emulated device without offload, and on it offloaded as `offload` says.
struct Runs {
    std::unique_ptr<ShardedOptimizer> host;
    std::unique_ptr<engine::StepEngine> device, offloaded;
    EmulatedDeviceSpace *space = nullptr; // the offloaded engine's
};

Runs make_runs(Communicator &comm, const Config &c, const ShardingOptions &offload, const float *initial) {
    Runs r;
    r.host = ShardedOptimizer::create(comm.shared_from_this(), offload_layout(), c.optimizer, c.sharding, initial);
    r.device = emulated_engine(comm, c, c.sharding, initial, nullptr);
    r.offloaded = emulated_engine(comm, c, offload, initial, &r.space);
    return r;
}

// Trains the three in lockstep; every step's report and the final parameters must be equal bit
// for bit.
void expect_offload_equal(const Config &c, const ShardingOptions &offload, int steps = 5) {
    std::mutex &mutex = assertion_mutex();
    run_inprocess(c.ranks, [&](Communicator &comm) {
        const std::vector<float> init = initial_values(offload_elements());
        Runs runs = make_runs(comm, c, offload, init.data());
        const std::size_t n = init.size();
        std::vector<float> a(n), b(n), x(n);
        for (int step = 0; step < steps; ++step) {
            runs.host->get_parameters(a.data());
            runs.device->get_parameters(b.data());
            runs.offloaded->get_parameters(x.data());
            const StepResult ra = train_step(*runs.host, a, comm.rank(), step, c);
            const StepResult rb = train_step(*runs.device, b, comm.rank(), step, c);
            const StepResult rx = train_step(*runs.offloaded, x, comm.rank(), step, c);
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(rx.applied == ra.applied, c.name << " step " << step);
            BOOST_TEST(rx.skipped_nonfinite == ra.skipped_nonfinite, c.name << " step " << step);
            BOOST_TEST(rx.applied == rb.applied, c.name << " step " << step);
            if (std::isfinite(ra.grad_norm)) {
                BOOST_TEST(rx.grad_norm == ra.grad_norm, c.name << " step " << step << ": the norm differs from host memory's");
                BOOST_TEST(rx.grad_norm == rb.grad_norm, c.name << " step " << step << ": the norm differs from the device run's");
            }
        }
        runs.host->get_parameters(a.data());
        runs.device->get_parameters(b.data());
        runs.offloaded->get_parameters(x.data());
        std::lock_guard<std::mutex> lock(mutex);
        BOOST_TEST(runs.offloaded->step_count() == runs.host->step_count(), c.name);
        BOOST_TEST(std::memcmp(x.data(), a.data(), n * sizeof(float)) == 0,
                   c.name << " rank " << comm.rank() << ": offloaded parameters differ from host memory's");
        BOOST_TEST(std::memcmp(x.data(), b.data(), n * sizeof(float)) == 0,
                   c.name << " rank " << comm.rank() << ": offloaded parameters differ from the device run's");
        BOOST_TEST(x != init, c.name << ": training changed nothing");
    });
}

// The offload modes a strategy takes: the optimizer, with the gradients, and for FSDP the
// parameter shard too (with and without the gradients).
std::vector<std::pair<std::string, ShardingOptions>> modes(const ShardingOptions &base) {
    std::vector<std::pair<std::string, ShardingOptions>> m = {{"optimizer", offloaded(base, false, false)},
                                                              {"optimizer+gradients", offloaded(base, true, false)}};
    if (data_strategy_of(base) == Strategy::fsdp) {
        m.push_back({"optimizer+params", offloaded(base, false, true)});
        m.push_back({"optimizer+gradients+params", offloaded(base, true, true)});
    }
    return m;
}

void expect_every_mode_equal(const Config &c, int steps = 5) {
    for (const auto &[mode, options] : modes(c.sharding)) {
        Config named = c;
        named.name = c.name + " offload " + mode;
        expect_offload_equal(named, options, steps);
    }
}

} // namespace

// --- the schedule --------------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(offload_schedule)

BOOST_AUTO_TEST_CASE(gradients_go_to_the_host_once_each_as_their_reductions_complete) {
    OffloadSchedule s({3});
    s.begin_backward();
    BOOST_TEST(ops(s.reduction_complete(2)) == "copy_grads_to_host(2)");
    BOOST_TEST(int(s.grads(2)) == int(OffloadSchedule::Grads::to_host));
    BOOST_TEST(int(s.grads(1)) == int(OffloadSchedule::Grads::on_device));
    BOOST_TEST(ops(s.reduction_complete(2)).empty()); // reported twice: copied once
    BOOST_TEST(ops(s.reduction_complete(0)) == "copy_grads_to_host(0)");
    // The norm needs every gradient: a bucket never reported is an error naming it.
    expect_error(ErrorCode::invalid_state, "bucket 1", [&] { s.gradients_on_host(); });
    BOOST_TEST(ops(s.reduction_complete(1)) == "copy_grads_to_host(1)");
    BOOST_TEST((s.copy_order() == std::vector<int>{2, 0, 1}));
    // The host waits in the order the copies were issued, then sums the norm.
    BOOST_TEST(ops(s.gradients_on_host()) ==
               "wait_grads_on_host(2), wait_grads_on_host(0), wait_grads_on_host(1), norm_on_host");
    for (int b = 0; b < 3; ++b) BOOST_TEST(int(s.grads(b)) == int(OffloadSchedule::Grads::on_host));
    expect_error(ErrorCode::invalid_argument, "bucket 3 out of range", [&] { s.reduction_complete(3); });
}

BOOST_AUTO_TEST_CASE(each_bucket_goes_back_while_the_next_is_updated) {
    OffloadSchedule::Config c;
    c.buckets = 3;
    c.gather_after_update = true; // ZeRO-1/2
    OffloadSchedule s(c);
    for (int step = 0; step < 2; ++step) {
        s.begin_backward();
        for (int b = 2; b >= 0; --b) s.reduction_complete(b);
        s.gradients_on_host();
        const std::string update = ops(s.update());
        if (step == 0)
            BOOST_TEST(update == "begin_update(0), begin_update(1), begin_update(2), "
                                 "finish_update(0), copy_params_to_device(0), device_waits_params(0), gather_params(0), "
                                 "finish_update(1), copy_params_to_device(1), device_waits_params(1), gather_params(1), "
                                 "finish_update(2), copy_params_to_device(2), device_waits_params(2), gather_params(2)");
        else // the last step's copy of b may still read b's master weights: waited for before b is updated
            BOOST_TEST(update == "begin_update(0), begin_update(1), begin_update(2), "
                                 "wait_params_copy(0), finish_update(0), copy_params_to_device(0), device_waits_params(0), "
                                 "gather_params(0), "
                                 "wait_params_copy(1), finish_update(1), copy_params_to_device(1), device_waits_params(1), "
                                 "gather_params(1), "
                                 "wait_params_copy(2), finish_update(2), copy_params_to_device(2), device_waits_params(2), "
                                 "gather_params(2)");
        for (int b = 0; b < 3; ++b) BOOST_TEST(s.host_params_in_use(b));
    }
    // Replacing the parameters waits for every copy still reading the master weights, once.
    BOOST_TEST(ops(s.replace_parameters()) == "wait_params_copy(0), wait_params_copy(1), wait_params_copy(2)");
    BOOST_TEST(ops(s.replace_parameters()).empty());
    s.begin_backward();
    expect_error(ErrorCode::invalid_state, "bucket 0", [&] { s.update(); }); // gradients not on the host
}

BOOST_AUTO_TEST_CASE(buckets_a_rank_does_not_own_copy_nothing_but_still_gather) {
    OffloadSchedule::Config c;
    c.buckets = 2;
    c.owns = {true, false};
    c.gather_after_update = true;
    OffloadSchedule s(c);
    s.begin_backward();
    BOOST_TEST(ops(s.reduction_complete(1)).empty());
    BOOST_TEST(ops(s.reduction_complete(0)) == "copy_grads_to_host(0)");
    BOOST_TEST(ops(s.gradients_on_host()) == "wait_grads_on_host(0), norm_on_host");
    BOOST_TEST(ops(s.update()) == "begin_update(0), finish_update(0), copy_params_to_device(0), "
                                  "device_waits_params(0), gather_params(0), gather_params(1)");
    expect_error(ErrorCode::invalid_argument, "owns has 1 entries for 2 buckets",
                 [] { OffloadSchedule({2, {true}}); });
}

BOOST_AUTO_TEST_CASE(fsdp_shard_on_the_host_is_copied_per_gather_and_never_after_the_update) {
    OffloadSchedule::Config c;
    c.buckets = 2;
    c.params_stay_on_host = true;
    OffloadSchedule s(c);
    BOOST_TEST(ops(s.gather(1)) == "copy_shard_to_device(1), device_waits_params(1), gather_params(1)");
    BOOST_TEST(s.host_params_in_use(1));
    BOOST_TEST(!s.host_params_in_use(0));
    s.begin_backward();
    s.reduction_complete(1);
    s.reduction_complete(0);
    s.gradients_on_host();
    // The CPU writes the resident shard: the copy for gather(1) must have read it first.
    BOOST_TEST(ops(s.update()) == "begin_update(0), begin_update(1), finish_update(0), wait_params_copy(1), finish_update(1)");
}

BOOST_AUTO_TEST_CASE(without_the_shard_on_the_host_a_gather_is_only_the_gather) {
    OffloadSchedule s({2});
    BOOST_TEST(ops(s.gather(0)) == "gather_params(0)");
    BOOST_TEST(!s.host_params_in_use(0));
}

BOOST_AUTO_TEST_CASE(lamb_sums_its_statistics_between_the_two_phases) {
    OffloadSchedule::Config c;
    c.buckets = 2;
    c.update_stats = true;
    OffloadSchedule s(c);
    s.begin_backward();
    s.reduction_complete(0);
    s.reduction_complete(1);
    s.gradients_on_host();
    BOOST_TEST(ops(s.update()) == "begin_update(0), begin_update(1), sum_update_stats, finish_update(0), "
                                  "copy_params_to_device(0), device_waits_params(0), finish_update(1), "
                                  "copy_params_to_device(1), device_waits_params(1)");
}

BOOST_AUTO_TEST_SUITE_END()

// --- the plan: checks and bytes ------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(offload_plan)

BOOST_AUTO_TEST_CASE(combinations_a_device_optimizer_refuses) {
    ShardingOptions o = with(Strategy::zero2);
    o.memory = MemorySpace::cuda;
    o.cpu_offload_gradients = true;
    expect_error(ErrorCode::invalid_argument, "cpu_offload_gradients needs cpu_offload_optimizer",
                 [&] { validate_sharding_options(o); });
    o = offloaded(with(Strategy::zero2), false, true);
    o.memory = MemorySpace::cuda;
    expect_error(ErrorCode::invalid_argument, "cpu_offload_params needs parameters sharded at rest",
                 [&] { validate_sharding_options(o); });
    o = offloaded(with(Strategy::fsdp), false, true);
    o.cpu_offload_optimizer = false;
    o.memory = MemorySpace::cuda;
    expect_error(ErrorCode::invalid_argument, "cpu_offload_params needs cpu_offload_optimizer",
                 [&] { validate_sharding_options(o); });
    o = offloaded(with(Strategy::local_sgd), false, false);
    o.memory = MemorySpace::cuda;
    expect_error(ErrorCode::invalid_argument, "local_sgd", [&] { validate_sharding_options(o); });
    o = offloaded(with(Strategy::hybrid), false, false);
    o.hybrid_data_strategy = Strategy::fsdp;
    o.hsdp_replicas = 2;
    o.memory = MemorySpace::cuda;
    expect_error(ErrorCode::invalid_argument, "hsdp_replicas", [&] { validate_sharding_options(o); });
    // Accepted: FSDP fully offloaded, hybrid with fsdp inside, and anything at all in host memory.
    o = offloaded(with(Strategy::fsdp), true, true);
    o.memory = MemorySpace::cuda;
    validate_sharding_options(o);
    o.strategy = Strategy::hybrid;
    o.hybrid_data_strategy = Strategy::fsdp;
    validate_sharding_options(o);
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::local_sgd}) {
        ShardingOptions h = with(s);
        h.cpu_offload_gradients = h.cpu_offload_params = true; // even without cpu_offload_optimizer
        validate_sharding_options(h);
        BOOST_TEST(!OffloadPlan::of(h, false).active());
    }
}

BOOST_AUTO_TEST_CASE(resident_bytes_follow_the_formulas) {
    ParameterSet layout = offload_layout();
    layout.plan(4);
    const std::size_t N = layout.padded_count() * 4, S = layout.shard_count() * 4, B = layout.max_bucket_padded() * 4;
    std::size_t max_shard = 0;
    for (const auto &bl : layout.buckets()) max_shard = std::max(max_shard, bl.shard);
    const std::size_t owned = 123; // elements this rank updates: given, not derived here
    const int slots = 2;          // Adam
    auto of = [&](Strategy s, bool opt, bool grads, bool params) {
        OffloadPlan p;
        p.optimizer = opt;
        p.gradients = grads;
        p.params = params;
        return OffloadResidency::of(p, plan_of(with(s)), layout, owned, slots);
    };
    // Without offload: the strategy's buffers, the state on the device.
    OffloadResidency r = of(Strategy::zero2, false, false, false);
    BOOST_TEST(r.device_params == N);
    BOOST_TEST(r.device_grads == S);
    BOOST_TEST(r.device_state == owned * 4 * 2);
    BOOST_TEST(r.device_staging_each == B);
    BOOST_TEST(r.host_grads + r.host_master + r.host_state + r.host_params == 0u);
    // DDP, optimizer offloaded: state and master weights leave the device; the host holds the
    // full padded buffer of gradients and master weights (DDP owns every bucket whole).
    r = of(Strategy::ddp, true, false, false);
    BOOST_TEST(r.device_params == N);
    BOOST_TEST(r.device_grads == N);
    BOOST_TEST(r.device_state == 0u);
    BOOST_TEST(r.device_staging_each == 0u);
    BOOST_TEST(r.host_grads == N);
    BOOST_TEST(r.host_master == N);
    BOOST_TEST(r.host_state == owned * 4 * 2);
    // ... and the gradients: DDP stages its buckets on the device instead of keeping them.
    r = of(Strategy::ddp, true, true, false);
    BOOST_TEST(r.device_grads == 0u);
    BOOST_TEST(r.device_staging_each == B);
    // ZeRO-1: the shard of gradients and master weights on the host.
    r = of(Strategy::zero1, true, true, false);
    BOOST_TEST(r.device_params == N);
    BOOST_TEST(r.device_grads == 0u);
    BOOST_TEST(r.host_grads == S);
    BOOST_TEST(r.host_master == S);
    // ZeRO-2 with gradients offloaded: each staging buffer also holds the reduce-scatter's output.
    r = of(Strategy::zero2, true, true, false);
    BOOST_TEST(r.device_grads == 0u);
    BOOST_TEST(r.device_staging_each == B + max_shard * 4);
    // FSDP fully offloaded: nothing at rest on the device; the host shard is the master copy.
    r = of(Strategy::fsdp, true, true, true);
    BOOST_TEST(r.device_params + r.device_grads + r.device_state == 0u);
    BOOST_TEST(r.host_params == S);
    BOOST_TEST(r.host_master == 0u);
    BOOST_TEST(r.host_grads == S);
    BOOST_TEST(r.host_state == owned * 4 * 2);
}

BOOST_AUTO_TEST_CASE(owned_regions_tile_the_host_buffers) {
    ParameterSet layout = offload_layout();
    layout.plan(3);
    for (Strategy s : {Strategy::ddp, Strategy::zero2}) {
        const StrategyPlan plan = plan_of(with(s));
        std::size_t next = 0;
        for (int b = 0; b < layout.bucket_count(); ++b) {
            const OwnedRegion r = owned_region(plan, layout, b);
            BOOST_TEST(r.host_offset == next, strategy_name(s) << " bucket " << b);
            next += r.count;
        }
        BOOST_TEST(next == owned_region_elements(plan, layout), strategy_name(s));
    }
}

BOOST_AUTO_TEST_SUITE_END()

// --- the engine, offloaded on an emulated device -------------------------------------------------

BOOST_AUTO_TEST_SUITE(offload_engine)

BOOST_AUTO_TEST_CASE(every_strategy_and_mode_trains_bit_for_bit_as_without_offload) {
    for (int ranks : {1, 2, 4})
        for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
            Config c{std::string(strategy_name(s)) + " x" + std::to_string(ranks), ranks, with(s)};
            c.sharding.max_grad_norm = 0.5; // the norm decides every step's scale
            expect_every_mode_equal(c);
        }
}

BOOST_AUTO_TEST_CASE(options_that_change_the_path) {
    Config accumulate{"zero2 accumulation 3, 2 staging buffers", 2, with(Strategy::zero2)};
    accumulate.sharding.gradient_accumulation_steps = 3;
    accumulate.sharding.staging_buffers = 2;
    expect_every_mode_equal(accumulate, 6);

    Config nonfinite{"zero1 NaN on step 2", 3, with(Strategy::zero1)};
    nonfinite.nonfinite_step = 2;
    expect_every_mode_equal(nonfinite);

    Config overlap{"zero2 overlapped gather", 3, with(Strategy::zero2)};
    overlap.sharding.overlap_param_gather = true;
    expect_every_mode_equal(overlap);

    Config noprefetch{"fsdp without prefetch", 3, with(Strategy::fsdp)};
    noprefetch.sharding.fsdp_prefetch = false;
    expect_every_mode_equal(noprefetch);

    Config sgd{"ddp sgd nesterov", 2, with(Strategy::ddp), OptimizerOptions::defaults(OptimizerKind::sgd)};
    sgd.optimizer.momentum = 0.9;
    sgd.optimizer.nesterov = true;
    expect_every_mode_equal(sgd);

    Config hybrid{"hybrid fsdp inside", 2, with(Strategy::hybrid)};
    hybrid.sharding.hybrid_data_strategy = Strategy::fsdp;
    expect_every_mode_equal(hybrid);
}

BOOST_AUTO_TEST_CASE(lamb_across_shards_runs_on_the_cpu) {
    // The device kernels refuse LAMB with tensors split across ranks; offloaded, the CPU rule sums
    // its per-tensor statistics across the shards as host memory does.
    Config lamb{"zero2 lamb x3", 3, with(Strategy::zero2), OptimizerOptions::defaults(OptimizerKind::lamb)};
    expect_every_mode_equal(lamb);
}

BOOST_AUTO_TEST_CASE(memory_stats_hold_what_the_formulas_say) {
    std::mutex &mutex = assertion_mutex();
    run_inprocess(4, [&](Communicator &comm) {
        for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
            for (const auto &[mode, options] : modes(with(s))) {
                const std::string name = std::string(strategy_name(s)) + " " + mode;
                Config c{name, 4, with(s)};
                EmulatedDeviceSpace *space = nullptr;
                auto plain = emulated_engine(comm, c, c.sharding, nullptr, nullptr);
                auto off = emulated_engine(comm, c, options, nullptr, &space);
                const MemoryStats m = off->memory_stats(), p = plain->memory_stats();
                const ParameterSet &layout = off->layout();
                const std::size_t N = layout.padded_count() * 4, S = layout.shard_count() * 4;
                std::size_t owned = 0; // elements this rank updates
                if (s == Strategy::ddp) owned = layout.element_count();
                else
                    for (const auto &bl : layout.buckets()) {
                        const std::size_t begin = std::size_t(comm.rank()) * bl.shard;
                        owned += bl.count > begin ? std::min(bl.shard, bl.count - begin) : 0;
                    }
                const bool sharded = s != Strategy::ddp, grads_sharded = s == Strategy::zero2 || s == Strategy::fsdp;
                std::lock_guard<std::mutex> lock(mutex);
                // Without offload: state on the device, nothing on the host.
                BOOST_TEST(p.optimizer_state_bytes == owned * 4 * 2, name);
                BOOST_TEST(p.host_total() == 0u, name);
                // Offloaded: the state and master weights are gone from the device ...
                BOOST_TEST(m.optimizer_state_bytes == 0u, name);
                BOOST_TEST(m.params_bytes == (options.cpu_offload_params ? 0 : s == Strategy::fsdp ? S : N), name);
                BOOST_TEST(m.grads_bytes == (options.cpu_offload_gradients ? 0 : grads_sharded ? S : N), name);
                BOOST_TEST(m.total() < p.total(), name);
                BOOST_TEST(p.total() - m.total() ==
                               owned * 4 * 2 + (options.cpu_offload_params ? S : 0) +
                                   (options.cpu_offload_gradients ? (grads_sharded ? S : N) : 0) - (m.buffer_bytes - p.buffer_bytes),
                           name);
                // ... and on the host, pinned where it crosses the bus.
                const std::size_t region = sharded ? S : N;
                BOOST_TEST(m.host_params_bytes == (options.cpu_offload_params ? S : 0), name);
                BOOST_TEST(m.host_grads_bytes == region, name);
                BOOST_TEST(m.host_optimizer_state_bytes == owned * 4 * 2 + (options.cpu_offload_params ? 0 : region), name);
                BOOST_TEST(space->pinned_bytes ==
                               m.host_params_bytes + m.host_grads_bytes + (options.cpu_offload_params ? 0 : region),
                           name);
            }
    });
}

BOOST_AUTO_TEST_CASE(copies_move_one_owned_region_per_bucket_and_the_device_waits_before_gathers) {
    std::mutex &mutex = assertion_mutex();
    run_inprocess(2, [&](Communicator &comm) {
        for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
            Config c{strategy_name(s), 2, with(s)};
            EmulatedDeviceSpace *space = nullptr;
            auto opt = emulated_engine(comm, c, offloaded(c.sharding, true, s == Strategy::fsdp),
                                       initial_values(offload_elements()).data(), &space);
            const ParameterSet &layout = opt->layout();
            std::vector<float> params(layout.element_count());
            opt->get_parameters(params.data());
            space->trace.clear();
            space->mark();
            // The backward: with one staging buffer each bucket's reduction completes when the
            // next bucket opens, and its gradient goes to the host right then, before step().
            opt->zero_grad();
            for (int b = layout.bucket_count() - 1; b >= 0; --b) {
                opt->gather(b);
                std::vector<float> g(layout.bucket(b).count, 0.25f);
                std::memcpy(opt->bucket_grad(b), g.data(), g.size() * sizeof(float));
                opt->grad_ready(b);
                opt->release(b);
            }
            const std::size_t before_step = space->trace.size();
            opt->step();
            const auto &t = space->trace;
            std::size_t to_host = 0, to_host_bytes = 0, to_host_before_step = 0, to_device = 0;
            const std::size_t region_bytes = (s == Strategy::ddp ? layout.padded_count() : layout.shard_count()) * 4;
            for (std::size_t i = 0; i < t.size(); ++i) {
                if (t[i].kind == TraceEvent::copy_to_host) {
                    ++to_host;
                    to_host_bytes += t[i].bytes;
                    if (i < before_step) ++to_host_before_step;
                }
                if (t[i].kind != TraceEvent::copy_to_device) continue;
                ++to_device;
                // Nothing collective is ordered after the copy before the device waits for it.
                bool waited = false;
                for (std::size_t j = i + 1; j < t.size() && !waited; ++j) {
                    if (t[j].kind == TraceEvent::compute_waits && t[j].lane == 1 && t[j].seq >= t[i].seq) waited = true;
                    else if (t[j].kind == TraceEvent::collective) break;
                }
                std::lock_guard<std::mutex> lock(mutex);
                BOOST_TEST(waited, strategy_name(s) << ": a collective was ordered before the device waited for copy "
                                                    << t[i].seq << " to the device");
            }
            std::lock_guard<std::mutex> lock(mutex);
            // Every bucket this rank owns part of crossed once each way (FSDP's shard: only by gathers).
            int owned_buckets = 0;
            for (int b = 0; b < layout.bucket_count(); ++b)
                owned_buckets += s == Strategy::ddp || layout.bucket(b).count > std::size_t(comm.rank()) * layout.bucket(b).shard;
            BOOST_TEST(to_host == std::size_t(owned_buckets), strategy_name(s));
            std::size_t owned_region_bytes = 0;
            for (int b = 0; b < layout.bucket_count(); ++b)
                if (s == Strategy::ddp || layout.bucket(b).count > std::size_t(comm.rank()) * layout.bucket(b).shard)
                    owned_region_bytes += (s == Strategy::ddp ? layout.bucket(b).padded : layout.bucket(b).shard) * 4;
            BOOST_TEST(to_host_bytes == owned_region_bytes, strategy_name(s));
            BOOST_TEST(to_host_bytes <= region_bytes, strategy_name(s));
            BOOST_TEST(to_host_before_step >= std::size_t(owned_buckets - 1), strategy_name(s) << ": copies issued in the backward");
            // FSDP with the shard on the host uploads per gather: one per bucket in the backward.
            BOOST_TEST(to_device == (s == Strategy::fsdp ? std::size_t(layout.bucket_count()) : std::size_t(owned_buckets)),
                       strategy_name(s));
        }
    });
}

BOOST_AUTO_TEST_CASE(checkpoints_and_set_parameters_keep_the_master_weights) {
    std::mutex &mutex = assertion_mutex();
    for (Strategy s : {Strategy::ddp, Strategy::zero2, Strategy::fsdp}) {
        std::vector<unsigned char> bytes;
        Config c{strategy_name(s), 2, with(s)};
        const ShardingOptions off = offloaded(c.sharding, true, s == Strategy::fsdp);
        run_inprocess(2, [&](Communicator &comm) {
            const std::vector<float> init = initial_values(offload_elements());
            Runs runs = make_runs(comm, c, off, init.data());
            std::vector<float> p(init.size());
            for (int step = 0; step < 3; ++step) {
                runs.offloaded->get_parameters(p.data());
                train_step(*runs.offloaded, p, comm.rank(), step, c);
                runs.host->get_parameters(p.data());
                train_step(*runs.host, p, comm.rank(), step, c);
            }
            // The offloaded optimizer's checkpoint in host memory, and the other way round.
            std::vector<unsigned char> mine = runs.offloaded->serialize();
            runs.device->deserialize(mine.data(), mine.size()); // a device run without offload resumes from it
            { const std::vector<unsigned char> theirs = runs.host->serialize(); runs.offloaded->deserialize(theirs.data(), theirs.size()); }
            // set_parameters, then a step: the master weights followed the parameters.
            std::vector<float> shifted = initial_values(init.size());
            for (float &x : shifted) x *= 0.5f;
            std::vector<float> q(init.size()), r(init.size()), d(init.size());
            for (int step = 3; step < 5; ++step) {
                runs.offloaded->get_parameters(q.data());
                train_step(*runs.offloaded, q, comm.rank(), step, c);
                runs.host->get_parameters(r.data());
                train_step(*runs.host, r, comm.rank(), step, c);
                runs.device->get_parameters(d.data());
                train_step(*runs.device, d, comm.rank(), step, c);
            }
            runs.offloaded->set_parameters(shifted.data());
            runs.host->set_parameters(shifted.data());
            runs.device->set_parameters(shifted.data());
            runs.offloaded->synchronize_optimizer_state();
            for (int step = 5; step < 7; ++step) {
                runs.offloaded->get_parameters(q.data());
                train_step(*runs.offloaded, q, comm.rank(), step, c);
                runs.host->get_parameters(r.data());
                train_step(*runs.host, r, comm.rank(), step, c);
                runs.device->get_parameters(d.data());
                train_step(*runs.device, d, comm.rank(), step, c);
            }
            runs.offloaded->get_parameters(q.data());
            runs.host->get_parameters(r.data());
            runs.device->get_parameters(d.data());
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(std::memcmp(q.data(), r.data(), q.size() * 4) == 0, strategy_name(s) << " rank " << comm.rank());
            BOOST_TEST(std::memcmp(d.data(), r.data(), d.size() * 4) == 0, strategy_name(s) << " rank " << comm.rank());
            BOOST_TEST(runs.offloaded->step_count() == 7, strategy_name(s));
        });
    }
}

BOOST_AUTO_TEST_CASE(refused_where_the_schedule_does_not_apply) {
    run_inprocess(2, [&](Communicator &comm) {
        Config c{"local_sgd", 2, with(Strategy::local_sgd)};
        expect_error(ErrorCode::invalid_argument, "local_sgd",
                     [&] { emulated_engine(comm, c, offloaded(c.sharding, false, false), nullptr, nullptr); });
        Config z{"zero2", 2, with(Strategy::zero2)};
        expect_error(ErrorCode::invalid_argument, "cpu_offload_params needs parameters sharded at rest",
                     [&] { emulated_engine(comm, z, offloaded(z.sharding, false, true), nullptr, nullptr); });
    });
}

// The offload schedule has one round of statistics between the update's halves and no place for
// an exchange of whole matrices: Adafactor (two rounds: row and column sums, then the update's
// RMS) and Muon (Newton-Schulz on whole matrices) are refused up front, naming the rule, rather
// than updating with partial statistics. Without offload the same engines build.
BOOST_AUTO_TEST_CASE(rules_the_schedule_cannot_run_are_refused_naming_them) {
    run_inprocess(2, [&](Communicator &comm) {
        Config adafactor{"zero2 adafactor", 2, with(Strategy::zero2), OptimizerOptions::defaults(OptimizerKind::adafactor)};
        expect_error(ErrorCode::unsupported, "adafactor has 2", [&] {
            emulated_engine(comm, adafactor, offloaded(adafactor.sharding, false, false), nullptr, nullptr);
        });
        const bool adafactor_builds = emulated_engine(comm, adafactor, adafactor.sharding, nullptr, nullptr) != nullptr;

        ParameterSet matrices(DType::f32, 2048);
        matrices.add_matrix("w", 24, 17);
        matrices.add("b", 24);
        const ShardingOptions zero2 = with(Strategy::zero2);
        const OptimizerOptions muon = OptimizerOptions::defaults(OptimizerKind::muon);
        auto muon_engine = [&](const ShardingOptions &o) {
            return std::make_unique<engine::StepEngine>(std::make_unique<EmulatedDeviceSpace>(), comm.shared_from_this(),
                                                        matrices, muon, o, nullptr);
        };
        expect_error(ErrorCode::unsupported, "transform whole matrices (muon)",
                     [&] { muon_engine(offloaded(zero2, true, false)); });
        const bool muon_builds = muon_engine(zero2) != nullptr;
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(adafactor_builds, "adafactor without offload");
        BOOST_TEST(muon_builds, "muon without offload");
    });
}

BOOST_AUTO_TEST_SUITE_END()

// --- host memory: the flags mean nothing ---------------------------------------------------------

BOOST_AUTO_TEST_SUITE(offload_in_host_memory)

BOOST_AUTO_TEST_CASE(flags_are_accepted_and_change_nothing) {
    std::mutex &mutex = assertion_mutex();
    run_inprocess(2, [&](Communicator &comm) {
        for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd}) {
            Config c{strategy_name(s), 2, with(s)};
            const std::vector<float> init = initial_values(offload_elements());
            ShardingOptions all = c.sharding;
            all.cpu_offload_optimizer = all.cpu_offload_gradients = all.cpu_offload_params = true;
            auto plain = ShardedOptimizer::create(comm.shared_from_this(), offload_layout(), c.optimizer, c.sharding,
                                                  init.data());
            auto flagged = ShardedOptimizer::create(comm.shared_from_this(), offload_layout(), c.optimizer, all, init.data());
            std::vector<float> a(init.size()), b(init.size());
            for (int step = 0; step < 3; ++step) {
                plain->get_parameters(a.data());
                flagged->get_parameters(b.data());
                train_step(*plain, a, comm.rank(), step, c);
                train_step(*flagged, b, comm.rank(), step, c);
            }
            plain->get_parameters(a.data());
            flagged->get_parameters(b.data());
            const MemoryStats ma = plain->memory_stats(), mb = flagged->memory_stats();
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * 4) == 0, strategy_name(s));
            BOOST_TEST(mb.params_bytes == ma.params_bytes, strategy_name(s));
            BOOST_TEST(mb.grads_bytes == ma.grads_bytes, strategy_name(s));
            BOOST_TEST(mb.optimizer_state_bytes == ma.optimizer_state_bytes, strategy_name(s));
            BOOST_TEST(mb.buffer_bytes == ma.buffer_bytes, strategy_name(s));
            BOOST_TEST(mb.peak_buffer_bytes == ma.peak_buffer_bytes, strategy_name(s));
            BOOST_TEST(mb.host_total() == 0u, strategy_name(s));
            BOOST_TEST(flagged->options().cpu_offload_params, strategy_name(s)); // kept as given
        }
    });
}

BOOST_AUTO_TEST_CASE(ranks_that_disagree_fail_naming_the_flag) {
    run_inprocess(2, [&](Communicator &comm) {
        ShardingOptions o = with(Strategy::zero2);
        o.cpu_offload_optimizer = comm.rank() == 1;
        expect_error(ErrorCode::mismatch, "cpu_offload_optimizer", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), offload_layout(),
                                     OptimizerOptions::defaults(OptimizerKind::adam), o);
        });
    });
}

BOOST_AUTO_TEST_SUITE_END()
