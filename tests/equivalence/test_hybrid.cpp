// Hybrid data x tensor x pipeline training of the demo MLP equals single-process training.
// Tensor parallel: fc1 split by rows (column-parallel), fc2 by columns (row-parallel), partial
// logits summed across the tensor group; fc2.bias is replicated there. Pipeline: stage 0 holds
// fc1, stage 1 holds fc2; activations and their gradients travel by send/recv, and each step
// accumulates the gradients of two micro-batches.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "shardopt/batch_split.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "training.hpp"

using namespace shardopt;
using namespace shardopt::testing;

namespace {

struct Part {
    int pp_size, tp_size, pp_rank, tp_rank;
    examples::MlpShape shape;
    int h() const { return shape.hidden / tp_size; } // hidden units on this tensor rank
    bool has_fc1() const { return pp_rank == 0; }
    bool has_fc2() const { return pp_rank == pp_size - 1; }

    std::vector<std::tuple<std::string, std::size_t, bool>> tensors() const {
        std::vector<std::tuple<std::string, std::size_t, bool>> t;
        if (has_fc1()) {
            t.emplace_back("fc1.weight", std::size_t(h()) * shape.inputs, false);
            t.emplace_back("fc1.bias", std::size_t(h()), false);
        }
        if (has_fc2()) {
            t.emplace_back("fc2.weight", std::size_t(shape.classes) * h(), false);
            t.emplace_back("fc2.bias", std::size_t(shape.classes), true);
        }
        return t;
    }

    // This part's slice of the full packed parameters.
    std::vector<double> slice(const std::vector<double> &full) const {
        const int I = shape.inputs, H = shape.hidden, C = shape.classes, lo = tp_rank * h();
        const double *w1 = full.data(), *b1 = w1 + H * I, *w2 = b1 + H, *b2 = w2 + C * H;
        std::vector<double> out;
        if (has_fc1()) {
            out.insert(out.end(), w1 + lo * I, w1 + (lo + h()) * I);
            out.insert(out.end(), b1 + lo, b1 + lo + h());
        }
        if (has_fc2()) {
            for (int c = 0; c < C; ++c) out.insert(out.end(), w2 + c * H + lo, w2 + c * H + lo + h());
            out.insert(out.end(), b2, b2 + C);
        }
        return out;
    }

    // Writes this part's slice back into the full packed parameters.
    void unslice(const std::vector<double> &part, std::vector<double> &full) const {
        const int I = shape.inputs, H = shape.hidden, C = shape.classes, lo = tp_rank * h();
        double *w1 = full.data(), *b1 = w1 + H * I, *w2 = b1 + H, *b2 = w2 + C * H;
        const double *p = part.data();
        if (has_fc1()) {
            std::copy(p, p + h() * I, w1 + lo * I);
            p += h() * I;
            std::copy(p, p + h(), b1 + lo);
            p += h();
        }
        if (has_fc2()) {
            for (int c = 0; c < C; ++c, p += h()) std::copy(p, p + h(), w2 + c * H + lo);
            std::copy(p, p + C, b2);
        }
    }

    // Mean-loss gradient of this part over `samples` (the whole pipeline takes part).
    void gradient(const examples::Dataset &data, const double *params, double *grad, const std::vector<std::int64_t> &samples,
                  ShardedOptimizer &opt) const {
        Communicator *tensor = opt.tensor_group().get(), *pipeline = opt.pipeline_group().get();
        const int I = shape.inputs, C = shape.classes, H = h();
        const std::size_t n = samples.size();
        std::vector<double> hidden(n * H), dhidden(n * H, 0.0);
        const double *w1 = params, *b1 = w1 + H * I;
        double *gw1 = grad, *gb1 = gw1 + H * I;
        if (has_fc1()) {
            for (std::size_t k = 0; k < n; ++k)
                for (int j = 0; j < H; ++j) {
                    double acc = b1[j];
                    for (int i = 0; i < I; ++i) acc += w1[j * I + i] * data.x[samples[k] * I + i];
                    hidden[k * H + j] = acc > 0 ? acc : 0;
                }
            if (!has_fc2()) pipeline->send(hidden.data(), hidden.size(), DType::f64, pp_rank + 1);
        }
        if (has_fc2()) {
            if (!has_fc1()) pipeline->recv(hidden.data(), hidden.size(), DType::f64, pp_rank - 1);
            const double *w2 = params + (has_fc1() ? H * I + H : 0), *b2 = w2 + C * H;
            double *gw2 = grad + (has_fc1() ? H * I + H : 0), *gb2 = gw2 + C * H;
            std::vector<double> logits(n * C, 0.0);
            for (std::size_t k = 0; k < n; ++k)
                for (int c = 0; c < C; ++c)
                    for (int j = 0; j < H; ++j) logits[k * C + c] += w2[c * H + j] * hidden[k * H + j];
            if (tensor->size() > 1) tensor->allreduce(logits.data(), logits.data(), logits.size(), DType::f64, ReduceOp::sum);
            for (std::size_t k = 0; k < n; ++k) {
                double *z = &logits[k * C];
                double mx = -INFINITY, denom = 0;
                for (int c = 0; c < C; ++c) mx = std::max(mx, z[c] += b2[c]);
                for (int c = 0; c < C; ++c) denom += std::exp(z[c] - mx);
                for (int c = 0; c < C; ++c) {
                    const double d = (std::exp(z[c] - mx) / denom - (c == data.y[samples[k]] ? 1.0 : 0.0)) / double(n);
                    gb2[c] += d;
                    for (int j = 0; j < H; ++j) {
                        gw2[c * H + j] += d * hidden[k * H + j];
                        dhidden[k * H + j] += w2[c * H + j] * d;
                    }
                }
            }
            if (!has_fc1()) pipeline->send(dhidden.data(), dhidden.size(), DType::f64, pp_rank - 1);
        }
        if (has_fc1()) {
            if (!has_fc2()) pipeline->recv(dhidden.data(), dhidden.size(), DType::f64, pp_rank + 1);
            for (std::size_t k = 0; k < n; ++k)
                for (int j = 0; j < H; ++j) {
                    if (hidden[k * H + j] <= 0) continue;
                    gb1[j] += dhidden[k * H + j];
                    for (int i = 0; i < I; ++i) gw1[j * I + i] += dhidden[k * H + j] * data.x[samples[k] * I + i];
                }
        }
    }
};

std::vector<double> train_hybrid(const TrainingSetup &setup, int pp, int tp, int dp, Strategy inner, int replicas = 1) {
    const auto data = examples::make_blobs(setup.samples, setup.shape.inputs, setup.shape.classes);
    const auto init = examples::mlp_init<double>(setup.shape);
    std::vector<double> full(init.size());
    std::mutex m;
    run_inprocess(pp * tp * dp, [&](Communicator &comm) {
        ShardingOptions o;
        o.strategy = Strategy::hybrid;
        o.pipeline_parallel_size = pp;
        o.tensor_parallel_size = tp;
        o.data_parallel_size = -1;
        o.hybrid_data_strategy = inner;
        o.hsdp_replicas = replicas;
        o.gradient_accumulation_steps = setup.accumulation;
        // The grid position follows from the rank (tensor ranks adjacent, then data, then pipeline).
        const int tp_rank = comm.rank() % tp, pp_rank = comm.rank() / (tp * dp);
        const Part part{pp, tp, pp_rank, tp_rank, setup.shape};
        ParameterSet layout(DType::f64);
        for (auto &[name, count, replicated] : part.tensors()) layout.add(name, count, replicated);
        const auto mine = part.slice(init);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, setup.optimizer, o, mine.data());
        const auto grid = opt->grid_position();
        if (grid.tp_rank != tp_rank || grid.pp_rank != pp_rank || grid.dp_size != dp)
            throw std::runtime_error("grid position differs from the documented rank order");
        std::vector<double> params(mine.size()), grad(mine.size());
        const std::int64_t n = std::int64_t(setup.samples);
        for (int step = 0; step < setup.steps; ++step) {
            for (int mb = 0; mb < setup.accumulation; ++mb) {
                opt->get_parameters(params.data());
                const std::int64_t mlo = n * mb / setup.accumulation, mhi = n * (mb + 1) / setup.accumulation;
                const BatchSlice slice = batch_slice(mlo, mhi - mlo, grid.dp_rank, int(dp));
                const std::vector<std::int64_t> idx = slice.indices();
                std::fill(grad.begin(), grad.end(), 0.0);
                part.gradient(data, params.data(), grad.data(), idx, *opt);
                const double weight = slice.weight;
                opt->zero_grad();
                for (int t = 0; t < opt->layout().tensor_count(); ++t) {
                    const auto &tl = opt->layout().tensor(t);
                    std::size_t packed = 0;
                    for (int k = 0; k < t; ++k) packed += opt->layout().tensor(k).count;
                    auto *g = static_cast<double *>(opt->grad(t));
                    for (std::size_t i = 0; i < tl.count; ++i) g[i] = grad[packed + i] * weight;
                }
                opt->step();
            }
        }
        opt->get_parameters(params.data());
        if (grid.dp_rank == 0) {
            std::lock_guard<std::mutex> lock(m);
            part.unslice(params, full);
        }
    });
    return full;
}

} // namespace

BOOST_AUTO_TEST_SUITE(hybrid)

BOOST_AUTO_TEST_CASE(pipeline_2_tensor_1_data_2) {
    TrainingSetup setup;
    setup.steps = 100;
    setup.accumulation = 2; // two pipeline micro-batches per step
    const auto reference = train_single_process<double>(setup);
    for (Strategy inner : {Strategy::ddp, Strategy::zero2, Strategy::fsdp}) {
        const double err = relative_error(train_hybrid(setup, 2, 1, 2, inner), reference);
        BOOST_TEST_INFO(strategy_name(inner) << " relative error " << err);
        BOOST_TEST(err <= 1e-12);
    }
}

BOOST_AUTO_TEST_CASE(pipeline_1_tensor_2_data_2) {
    TrainingSetup setup;
    setup.steps = 100;
    const auto reference = train_single_process<double>(setup);
    for (Strategy inner : {Strategy::ddp, Strategy::zero1, Strategy::fsdp}) {
        const double err = relative_error(train_hybrid(setup, 1, 2, 2, inner), reference);
        BOOST_TEST_INFO(strategy_name(inner) << " relative error " << err);
        BOOST_TEST(err <= 1e-12);
    }
}

// HSDP: FSDP inside groups of 2, replicated across 2 groups, on 4 ranks.
BOOST_AUTO_TEST_CASE(hsdp_shard_in_group_replicate_across) {
    TrainingSetup setup;
    setup.steps = 100;
    const auto reference = train_single_process<double>(setup);
    const double err = relative_error(train_hybrid(setup, 1, 1, 4, Strategy::fsdp, 2), reference);
    BOOST_TEST_INFO("relative error " << err);
    BOOST_TEST(err <= 1e-12);
}

BOOST_AUTO_TEST_SUITE_END()
