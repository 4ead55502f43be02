// The threaded optimizer update: cutting the update across threads changes nothing, bitwise,
// for every rule and for the ShardedOptimizer; the cuts cover every element once, in order, at
// cache-line boundaries; the pool reports errors from its workers.
#define BOOST_TEST_MODULE parallel_update
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/cpu_dispatch.hpp"
#include "optim/parallel_update.hpp"
#include "optim/thread_pool.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;

namespace {

struct Rule {
    std::string name;
    OptimizerOptions options;
};

std::vector<Rule> rules() {
    std::vector<Rule> r;
    auto add = [&](std::string name, OptimizerKind kind, auto tweak) {
        OptimizerOptions o = OptimizerOptions::defaults(kind);
        tweak(o);
        r.push_back({std::move(name), o});
    };
    add("sgd_momentum", OptimizerKind::sgd, [](OptimizerOptions &o) { o.lr = 0.1; o.momentum = 0.9; o.weight_decay = 1e-2; });
    add("sgd_nesterov", OptimizerKind::sgd, [](OptimizerOptions &o) { o.lr = 0.1; o.momentum = 0.9; o.nesterov = true; });
    add("adam", OptimizerKind::adam, [](OptimizerOptions &) {});
    add("adam_l2_amsgrad", OptimizerKind::adam, [](OptimizerOptions &o) { o.weight_decay = 1e-2; o.amsgrad = true; });
    add("adamw", OptimizerKind::adamw, [](OptimizerOptions &o) { o.weight_decay = 1e-2; });
    add("rmsprop_centered_momentum", OptimizerKind::rmsprop,
        [](OptimizerOptions &o) { o.centered = true; o.momentum = 0.5; });
    add("rmsprop", OptimizerKind::rmsprop, [](OptimizerOptions &) {});
    add("adagrad", OptimizerKind::adagrad, [](OptimizerOptions &o) { o.lr_decay = 1e-3; o.initial_accumulator_value = 0.1; });
    add("lamb", OptimizerKind::lamb, [](OptimizerOptions &o) { o.weight_decay = 1e-2; });
    return r;
}

// Flat param/grad/state buffers for a list of tensor sizes, starting `skew` elements into
// 64-byte aligned storage, so segments start at unaligned addresses.
template <typename T> struct Buffers {
    std::vector<T> storage; // param | grad | state 0 | state 1 | ...
    std::size_t n = 0, skew = 0;
    int slots = 0;

    Buffers(std::size_t n_, std::size_t skew_, int slots_, const Optimizer &opt, unsigned seed)
        : n(n_), skew(skew_), slots(slots_) {
        storage.resize((2 + std::size_t(slots)) * (n + 64) + 64);
        std::mt19937 rng(seed);
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        for (std::size_t i = 0; i < n; ++i) {
            param()[i] = T(u(rng));
            grad()[i] = T(0.1 * u(rng));
        }
        for (int k = 0; k < slots; ++k)
            for (std::size_t i = 0; i < n; ++i) state(k)[i] = T(opt.state_initial_value(k));
    }
    T *array(int a) {
        T *base = storage.data() + std::size_t(a) * (n + 64);
        while (reinterpret_cast<std::uintptr_t>(base) % 64 != 0) ++base;
        return base + skew;
    }
    T *param() { return array(0); }
    T *grad() { return array(1); }
    T *state(int k) { return array(2 + k); }

    // Segments for consecutive tensors of these sizes (sum == n).
    std::vector<Segment<T>> segments(const std::vector<std::size_t> &sizes) {
        std::vector<Segment<T>> out;
        std::size_t offset = 0;
        for (std::size_t t = 0; t < sizes.size(); ++t) {
            Segment<T> s;
            s.param = param() + offset;
            s.grad = grad() + offset;
            for (int k = 0; k < slots; ++k) s.state[k] = state(k) + offset;
            s.count = sizes[t];
            s.tensor = int(t);
            s.stats[0] = t * 2; // LAMB's two per tensor, tensor-major (the buffers below)
            out.push_back(s);
            offset += sizes[t];
        }
        return out;
    }
    bool same_as(Buffers &o) {
        bool same = std::memcmp(param(), o.param(), n * sizeof(T)) == 0;
        for (int k = 0; k < slots; ++k) same = same && std::memcmp(state(k), o.state(k), n * sizeof(T)) == 0;
        return same;
    }
};

// One step of the reference: every segment in order on this thread.
template <typename T>
void reference_step(const Optimizer &opt, const std::vector<Segment<T>> &segs, int64_t step, int tensors) {
    std::vector<double> stats(std::size_t(tensors) * std::max(1, opt.tensor_stats()), 0.0);
    if (opt.tensor_stats() > 0)
        for (const auto &s : segs) opt.begin_step(s, step, stats.data());
    for (const auto &s : segs) opt.apply(s, step, opt.tensor_stats() > 0 ? stats.data() : nullptr);
}

// Same step cut by split_segments into `parts` pieces, each piece run on its own (sequentially:
// what each thread would do), phase 1 whole as ParallelUpdate does.
template <typename T>
void split_step(const Optimizer &opt, const std::vector<Segment<T>> &segs, int64_t step, int tensors, int parts) {
    std::vector<double> stats(std::size_t(tensors) * std::max(1, opt.tensor_stats()), 0.0);
    if (opt.tensor_stats() > 0)
        for (const auto &s : segs) opt.begin_step(s, step, stats.data());
    for (const auto &piece : split_segments(segs, parts))
        for (const auto &s : piece) opt.apply(s, step, opt.tensor_stats() > 0 ? stats.data() : nullptr);
}

template <typename T>
void threaded_step(ParallelUpdate &engine, const Optimizer &opt, const std::vector<Segment<T>> &segs, int64_t step,
                   int tensors) {
    std::vector<double> stats(std::size_t(tensors) * std::max(1, opt.tensor_stats()), 0.0);
    if (opt.tensor_stats() > 0) engine.begin_step(opt, segs, step, stats.data());
    engine.apply(opt, segs, step, opt.tensor_stats() > 0 ? stats.data() : nullptr);
}

const std::vector<std::vector<std::size_t>> kSmallLayouts{{1}, {7}, {17, 3, 64}, {255, 1, 1000}, {4099}};
const std::vector<std::vector<std::size_t>> kLargeLayouts{
    {65536}, {65537}, {100003}, {40000, 25001, 7, 60000}, {1, 262147, 3}};

template <typename T> void check_all_rules() {
    for (const Rule &rule : rules()) {
        auto opt = Optimizer::create(rule.options);
        for (std::size_t skew : {0, 1, 3}) {
            // Small layouts: below the threading threshold, so check the cuts themselves.
            for (const auto &sizes : kSmallLayouts) {
                std::size_t n = 0;
                for (auto s : sizes) n += s;
                for (int parts : {2, 3, 5}) {
                    BOOST_TEST_CONTEXT(rule.name << " " << sizeof(T) * 8 << "-bit n=" << n << " skew=" << skew
                                                 << " parts=" << parts) {
                        Buffers<T> ref(n, skew, opt->state_slots(), *opt, 1), cut(n, skew, opt->state_slots(), *opt, 1);
                        for (int64_t step = 1; step <= 3; ++step) {
                            reference_step(*opt, ref.segments(sizes), step, int(sizes.size()));
                            split_step(*opt, cut.segments(sizes), step, int(sizes.size()), parts);
                        }
                        BOOST_TEST(ref.same_as(cut));
                    }
                }
            }
            // Large layouts: through ParallelUpdate and real threads.
            for (const auto &sizes : kLargeLayouts) {
                std::size_t n = 0;
                for (auto s : sizes) n += s;
                for (int threads : {2, 3, 4}) {
                    BOOST_TEST_CONTEXT(rule.name << " " << sizeof(T) * 8 << "-bit n=" << n << " skew=" << skew
                                                 << " threads=" << threads) {
                        ParallelUpdate engine(threads);
                        Buffers<T> ref(n, skew, opt->state_slots(), *opt, 2), thr(n, skew, opt->state_slots(), *opt, 2);
                        for (int64_t step = 1; step <= 3; ++step) {
                            reference_step(*opt, ref.segments(sizes), step, int(sizes.size()));
                            threaded_step(engine, *opt, thr.segments(sizes), step, int(sizes.size()));
                        }
                        BOOST_TEST(ref.same_as(thr));
                    }
                }
            }
        }
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(threaded_update_is_bitwise_single_threaded_f32) { check_all_rules<float>(); }
BOOST_AUTO_TEST_CASE(threaded_update_is_bitwise_single_threaded_f64) { check_all_rules<double>(); }

// The AVX2 loops (where the CPU has them) and the baseline loops agree bitwise.
BOOST_AUTO_TEST_CASE(avx2_and_generic_kernels_agree_bitwise) {
    const std::vector<std::size_t> sizes{1, 7, 4099, 65537};
    for (const Rule &rule : rules()) {
        auto opt = Optimizer::create(rule.options);
        for (std::size_t skew : {0, 3}) {
            BOOST_TEST_CONTEXT(rule.name << " skew=" << skew) {
                Buffers<float> fast(69644, skew, opt->state_slots(), *opt, 3), base(69644, skew, opt->state_slots(), *opt, 3);
                Buffers<double> fast64(69644, skew, opt->state_slots(), *opt, 4), base64(69644, skew, opt->state_slots(), *opt, 4);
                for (int64_t step = 1; step <= 3; ++step) {
                    optim_kernels::force_generic_kernels(false);
                    reference_step(*opt, fast.segments(sizes), step, 4);
                    reference_step(*opt, fast64.segments(sizes), step, 4);
                    optim_kernels::force_generic_kernels(true);
                    reference_step(*opt, base.segments(sizes), step, 4);
                    reference_step(*opt, base64.segments(sizes), step, 4);
                }
                optim_kernels::force_generic_kernels(false);
                BOOST_TEST(fast.same_as(base));
                BOOST_TEST(fast64.same_as(base64));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(split_covers_every_element_once_at_cache_lines) {
    std::vector<float> storage(300000 + 64);
    float *base = storage.data();
    while (reinterpret_cast<std::uintptr_t>(base) % 64 != 0) ++base;
    for (std::size_t skew : {0, 1, 5}) {
        for (const auto &sizes : {std::vector<std::size_t>{1}, std::vector<std::size_t>{3, 0, 9},
                                  std::vector<std::size_t>{100003}, std::vector<std::size_t>{40000, 25001, 7, 60000}}) {
            std::vector<Segment<float>> segs;
            std::size_t offset = skew;
            for (auto s : sizes) {
                Segment<float> seg;
                seg.param = base + offset;
                seg.grad = base + offset;
                seg.count = s;
                segs.push_back(seg);
                offset += s;
            }
            for (int parts : {1, 2, 3, 7, 16}) {
                const auto pieces = split_segments(segs, parts);
                BOOST_TEST(int(pieces.size()) <= parts);
                float *next = base + skew;
                for (std::size_t j = 0; j < pieces.size(); ++j) {
                    BOOST_TEST(!pieces[j].empty());
                    for (std::size_t k = 0; k < pieces[j].size(); ++k) {
                        const auto &s = pieces[j][k];
                        BOOST_TEST(s.count > 0u);
                        BOOST_TEST(s.grad == s.param);
                        // Pieces start at a cut: aligned unless at a segment start.
                        if (j > 0 && k == 0) {
                            bool at_segment_start = false;
                            for (const auto &orig : segs) at_segment_start |= orig.param == s.param;
                            BOOST_TEST((at_segment_start || reinterpret_cast<std::uintptr_t>(s.param) % 64 == 0));
                        }
                        BOOST_TEST(s.param == next);
                        next = s.param + s.count;
                    }
                }
                BOOST_TEST(next == base + offset);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(thread_pool_runs_every_task_and_reports_errors) {
    ThreadPool pool(4);
    BOOST_TEST(pool.size() == 4);
    for (int round = 0; round < 50; ++round) {
        const int tasks = 1 + round % 4;
        std::vector<int> hits(4, 0);
        pool.run(tasks, [&](int j) { ++hits[std::size_t(j)]; });
        for (int j = 0; j < 4; ++j) BOOST_TEST(hits[std::size_t(j)] == (j < tasks ? 1 : 0));
    }
    BOOST_CHECK_THROW(pool.run(3, [](int j) { if (j == 2) throw std::runtime_error("task 2"); }), std::runtime_error);
    int ran = 0;
    pool.run(1, [&](int) { ++ran; });
    BOOST_TEST(ran == 1);
}

BOOST_AUTO_TEST_CASE(update_threads_option) {
    BOOST_TEST(resolve_update_threads(3) == 3);
    BOOST_TEST(resolve_update_threads(0) >= 1);
    BOOST_CHECK_THROW(resolve_update_threads(-1), Error);
}

namespace {

ParameterSet layout() {
    ParameterSet l(DType::f32, 256 << 10);
    l.add("a", 300001);
    l.add("b", 7);
    l.add("c", 150000);
    l.add("d", 33);
    return l;
}

// Parameters after three steps on 2 in-process ranks.
std::vector<float> train(Strategy strategy, const OptimizerOptions &optimizer, int update_threads) {
    std::vector<float> result;
    std::mutex m;
    run_inprocess(2, [&](Communicator &comm) {
        ShardingOptions o;
        o.strategy = strategy;
        o.update_threads = update_threads;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout(), optimizer, o);
        for (int step = 0; step < 3; ++step) {
            opt->zero_grad();
            for (int b = opt->layout().bucket_count() - 1; b >= 0; --b) {
                opt->gather(b);
                auto *g = static_cast<float *>(opt->bucket_grad(b));
                const auto &bl = opt->layout().bucket(b);
                for (std::size_t i = 0; i < bl.count; ++i)
                    g[i] = float(int((bl.offset + i) * 2654435761u % 2001) - 1000) * 1e-4f * float(comm.rank() + step + 1);
                opt->grad_ready(b);
                opt->release(b);
            }
            opt->step();
        }
        std::vector<float> params(opt->layout().element_count());
        opt->get_parameters(params.data());
        if (comm.rank() == 0) {
            std::lock_guard<std::mutex> lock(m);
            result = params;
        }
    });
    return result;
}

} // namespace

BOOST_AUTO_TEST_CASE(sharded_optimizer_two_update_threads_equal_one) {
    for (const Rule &rule : rules()) {
        for (Strategy s : {Strategy::ddp, Strategy::zero2, Strategy::fsdp}) {
            BOOST_TEST_CONTEXT(rule.name << " " << strategy_name(s)) {
                const auto one = train(s, rule.options, 1), two = train(s, rule.options, 2);
                BOOST_TEST(one.size() == 450041u);
                BOOST_TEST((one.size() == two.size() && std::memcmp(one.data(), two.data(), one.size() * 4) == 0));
            }
        }
    }
    ShardingOptions bad;
    bad.update_threads = -1;
    BOOST_CHECK_THROW(run_inprocess(1, [&](Communicator &comm) {
                          ShardedOptimizer::create(comm.shared_from_this(), layout(),
                                                   OptimizerOptions::defaults(OptimizerKind::adam), bad);
                      }),
                      Error);
}
