// Base optimizers: every rule against independent float64 reference values, the property the
// sharded optimizers rely on (a buffer updated whole equals it updated cut into segments),
// option validation, and torch.optim's defaults.
#define BOOST_TEST_MODULE optimizers
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../optim/reference/reference_values.hpp"
#include "shardopt/error.hpp"
#include "shardopt/optim.hpp"

using namespace shardopt;
namespace bdata = boost::unit_test::data;

namespace {

// A slice of the flat buffer inside one tensor.
struct Cut {
    std::size_t offset;
    std::size_t count;
    int tensor;
};

// One slice per tensor: the buffer updated whole.
std::vector<Cut> whole_tensors(const std::vector<std::size_t> &sizes) {
    std::vector<Cut> cuts;
    std::size_t offset = 0;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
        cuts.push_back({offset, sizes[t], int(t)});
        offset += sizes[t];
    }
    return cuts;
}

// The buffer cut at the given global offsets, and at tensor boundaries (a slice never spans two
// tensors), as shards cut it.
std::vector<Cut> cut_at(const std::vector<std::size_t> &sizes, std::vector<std::size_t> points) {
    std::size_t offset = 0;
    for (std::size_t size : sizes) points.push_back(offset += size);
    std::sort(points.begin(), points.end());
    std::vector<Cut> cuts;
    std::size_t begin = 0, tensor_end = sizes[0];
    int tensor = 0;
    for (std::size_t end : points) {
        if (end > begin) cuts.push_back({begin, end - begin, tensor});
        begin = std::max(begin, end);
        if (end == tensor_end && tensor + 1 < int(sizes.size())) tensor_end += sizes[++tensor];
    }
    return cuts;
}

// Parameters and optimizer state for a flat buffer, stepped the way a sharded optimizer does:
// each phase on every slice with the statistics combined in between (here simply shared), the
// whole matrices of Muon transformed once between begin_step and apply, then apply on every
// slice. Each slice keeps its own copy of per-tensor state, as a rank does.
template <typename T> class Trainer {
  public:
    Trainer(const OptimizerOptions &options, const std::vector<double> &initial, const std::vector<std::size_t> &sizes,
            const std::vector<std::size_t> &rows = {})
        : optimizer_(Optimizer::create(options)), params_(initial.begin(), initial.end()), sizes_(sizes) {
        for (int k = 0; k < optimizer_->state_slots(); ++k)
            state_.emplace_back(initial.size(), T(optimizer_->state_initial_value(k)));
        std::size_t start = 0;
        for (std::size_t t = 0; t < sizes.size(); ++t) {
            TensorShape shape;
            shape.count = sizes[t];
            shape.rows = t < rows.size() ? rows[t] : 0;
            shapes_.push_back(shape);
            starts_.push_back(start);
            start += sizes[t];
        }
        for (int p = 0; p < optimizer_->stat_phases(); ++p) {
            std::vector<std::size_t> at;
            for (const auto &shape : shapes_) {
                at.push_back(stats_size_);
                stats_size_ += optimizer_->phase_stats(p, shape);
            }
            stat_offsets_.push_back(at);
        }
        matrices_.resize(sizes.size());
        for (std::size_t t = 0; t < sizes.size(); ++t)
            if (optimizer_->transforms_matrices() && shapes_[t].matrix()) matrices_[t].resize(sizes[t]);
    }

    void step(int64_t step, const std::vector<T> &grad, const std::vector<Cut> &cuts) {
        if (tensor_state_.size() != cuts.size()) {
            tensor_state_.clear();
            for (const Cut &c : cuts)
                tensor_state_.emplace_back(optimizer_->tensor_state(shapes_[std::size_t(c.tensor)]), T(0));
        }
        std::vector<double> stats(stats_size_, 0.0);
        std::vector<Segment<T>> segs;
        for (std::size_t i = 0; i < cuts.size(); ++i) segs.push_back(segment(cuts[i], grad, i));
        if (optimizer_->has_first_phase())
            for (const auto &s : segs) optimizer_->begin_step(s, step, stats.data());
        for (int p = 1; p < optimizer_->stat_phases(); ++p)
            for (const auto &s : segs) optimizer_->continue_step(p, s, step, stats.data());
        for (std::size_t t = 0; t < matrices_.size(); ++t)
            if (!matrices_[t].empty())
                optimizer_->transform_matrix(matrices_[t].data(), shapes_[t].rows, shapes_[t].cols());
        for (const auto &s : segs) optimizer_->apply(s, step, stats.empty() ? nullptr : stats.data());
    }

    const std::vector<T> &params() const { return params_; }
    const std::vector<std::vector<T>> &state() const { return state_; }
    const std::vector<std::vector<T>> &tensor_state() const { return tensor_state_; }

  private:
    Segment<T> segment(const Cut &c, const std::vector<T> &grad, std::size_t index) {
        const std::size_t t = std::size_t(c.tensor);
        Segment<T> seg;
        seg.param = params_.data() + c.offset;
        seg.grad = grad.data() + c.offset;
        for (std::size_t k = 0; k < state_.size(); ++k) seg.state[k] = state_[k].data() + c.offset;
        seg.count = c.count;
        seg.tensor = c.tensor;
        seg.offset = c.offset - starts_[t];
        seg.shape = shapes_[t];
        for (std::size_t p = 0; p < stat_offsets_.size(); ++p) seg.stats[p] = stat_offsets_[p][t];
        if (!tensor_state_[index].empty()) seg.tensor_state = tensor_state_[index].data();
        if (!matrices_[t].empty()) seg.matrix = matrices_[t].data() + seg.offset;
        return seg;
    }

    std::unique_ptr<Optimizer> optimizer_;
    std::vector<T> params_;
    std::vector<std::vector<T>> state_;
    std::vector<std::size_t> sizes_, starts_;
    std::vector<TensorShape> shapes_;
    std::vector<std::vector<std::size_t>> stat_offsets_; // [phase][tensor]
    std::size_t stats_size_ = 0;
    std::vector<std::vector<T>> tensor_state_;           // per cut
    std::vector<std::vector<T>> matrices_;               // per tensor (Muon)
};

// Largest error relative to the expected value's magnitude; inputs and results are O(1), and
// the floor of 1 keeps a parameter passing near zero from turning rounding into a failure.
template <typename T> double max_relative_error(const std::vector<T> &actual, const std::vector<double> &expected) {
    double worst = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        double err = std::abs(double(actual[i]) - expected[i]) / std::max(std::abs(expected[i]), 1.0);
        worst = std::max(worst, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
    }
    return worst;
}

const std::vector<reference::ReferenceCase> &reference_cases() {
    static const std::vector<reference::ReferenceCase> cases = reference::reference_cases();
    return cases;
}

std::vector<std::string> reference_case_names() {
    std::vector<std::string> names;
    for (const auto &c : reference_cases()) names.push_back(c.name);
    return names;
}

const reference::ReferenceCase &reference_case(const std::string &name) {
    for (const auto &c : reference_cases())
        if (name == c.name) return c;
    throw std::logic_error("no reference case " + name);
}

template <typename T> void check_against_reference(const std::string &name, double tolerance) {
    const auto &c = reference_case(name);
    Trainer<T> trainer(c.options, c.initial, c.tensor_sizes, c.tensor_rows);
    const auto cuts = whole_tensors(c.tensor_sizes);
    std::size_t next = 0;
    double worst = 0.0;
    for (int64_t step = 1; step <= int64_t(c.grads.size()); ++step) {
        const auto &g = c.grads[std::size_t(step - 1)];
        trainer.step(step, std::vector<T>(g.begin(), g.end()), cuts);
        if (next < c.expected.size() && c.expected[next].first == step) {
            const double error = max_relative_error(trainer.params(), c.expected[next].second);
            worst = std::max(worst, error);
            BOOST_TEST_CONTEXT(name << " after step " << step) { BOOST_TEST(error <= tolerance); }
            ++next;
        }
    }
    BOOST_TEST(next == c.expected.size());
    // ctest -V / --log_level=message: the figure docs/optimizers.md quotes.
    BOOST_TEST_MESSAGE(name << " (" << (sizeof(T) == 8 ? "f64" : "f32") << "): worst relative difference " << worst);
}

// Random O(1) buffers, big enough that the vectorized loops and their scalar tails both run.
std::vector<double> random_values(std::mt19937 &rng, std::size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> values(n);
    for (double &v : values) v = dist(rng);
    return values;
}

template <typename T> bool bitwise_equal(const std::vector<T> &a, const std::vector<T> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Runs the same steps on a buffer updated whole and cut into uneven slices (the first shorter
// than a vector register, the others starting unaligned) and compares the results.
template <typename T> void check_segments_equal_whole(const std::string &name, double lamb_tolerance) {
    const auto &c = reference_case(name);
    // Shaped rules (Adafactor, Muon) get a 17 x 36 matrix (612 elements) and a vector.
    const bool shaped = !c.tensor_rows.empty();
    const std::vector<std::size_t> sizes = c.tensor_sizes.size() == 1 && !shaped ? std::vector<std::size_t>{1003}
                                           : shaped                          ? std::vector<std::size_t>{612, 391}
                                                                              : std::vector<std::size_t>{611, 392};
    const std::vector<std::size_t> rows = shaped ? std::vector<std::size_t>{17, 0} : std::vector<std::size_t>{};
    const std::size_t total = 1003;
    std::mt19937 rng(42);
    std::vector<double> initial = random_values(rng, total, -2.0, 2.0);
    Trainer<T> whole(c.options, initial, sizes, rows);
    Trainer<T> cut(c.options, initial, sizes, rows);
    const auto whole_cuts = whole_tensors(sizes);
    const auto uneven_cuts = cut_at(sizes, {5, 618});
    for (int64_t step = 1; step <= 5; ++step) {
        std::vector<double> g = random_values(rng, total, -1.0, 1.0);
        std::vector<T> grad(g.begin(), g.end());
        whole.step(step, grad, whole_cuts);
        cut.step(step, grad, uneven_cuts);
    }
    const bool per_tensor_sums = c.options.kind == OptimizerKind::lamb || c.options.kind == OptimizerKind::adafactor;
    if (!per_tensor_sums)
        for (std::size_t k = 0; k < whole.state().size(); ++k)
            BOOST_TEST(bitwise_equal(whole.state()[k], cut.state()[k]), name << ": state slot " << k);
    if (per_tensor_sums) {
        // Per-tensor norms (and Adafactor's row and column sums) are summed in a different order,
        // so the results may differ in the last bits; everything element-wise is identical.
        std::vector<double> expected(whole.params().begin(), whole.params().end());
        BOOST_TEST(max_relative_error(cut.params(), expected) <= lamb_tolerance, name);
    } else {
        BOOST_TEST(bitwise_equal(whole.params(), cut.params()), name);
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(reference)

// float64 rounding over 10 steps of a few operations each stays near 1e-15.
BOOST_DATA_TEST_CASE(f64_matches_reference, bdata::make(reference_case_names()), name) {
    check_against_reference<double>(name, 1e-12);
}

// float32 rounds to 6e-8 relative; over 10 steps the largest error seen is 2.4e-7 (about four
// roundings). 1e-6 leaves room for another compiler's contractions yet still catches a
// hyper-parameter computed in float instead of double (Adam's bias correction: 2.5e-6).
BOOST_DATA_TEST_CASE(f32_matches_reference, bdata::make(reference_case_names()), name) {
    check_against_reference<float>(name, 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sharding)

BOOST_DATA_TEST_CASE(f32_segments_equal_whole_buffer, bdata::make(reference_case_names()), name) {
    check_segments_equal_whole<float>(name, 1e-6);
}

BOOST_DATA_TEST_CASE(f64_segments_equal_whole_buffer, bdata::make(reference_case_names()), name) {
    check_segments_equal_whole<double>(name, 1e-14);
}

BOOST_AUTO_TEST_CASE(cuts_split_at_tensor_boundaries) {
    const auto cuts = cut_at({611, 392}, {5, 618});
    BOOST_TEST_REQUIRE(cuts.size() == 4u);
    BOOST_TEST((cuts[0].offset == 0 && cuts[0].count == 5 && cuts[0].tensor == 0));
    BOOST_TEST((cuts[1].offset == 5 && cuts[1].count == 606 && cuts[1].tensor == 0));
    BOOST_TEST((cuts[2].offset == 611 && cuts[2].count == 7 && cuts[2].tensor == 1));
    BOOST_TEST((cuts[3].offset == 618 && cuts[3].count == 385 && cuts[3].tensor == 1));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(options)

BOOST_AUTO_TEST_CASE(defaults_match_torch) {
    const auto sgd = OptimizerOptions::defaults(OptimizerKind::sgd);
    BOOST_TEST(sgd.lr == 1e-3);
    BOOST_TEST(sgd.momentum == 0.0);
    BOOST_TEST(sgd.dampening == 0.0);
    BOOST_TEST(sgd.weight_decay == 0.0);
    BOOST_TEST(!sgd.nesterov);
    BOOST_TEST(!sgd.maximize);

    for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw}) {
        const auto adam = OptimizerOptions::defaults(kind);
        BOOST_TEST(adam.lr == 1e-3);
        BOOST_TEST(adam.beta1 == 0.9);
        BOOST_TEST(adam.beta2 == 0.999);
        BOOST_TEST(adam.eps == 1e-8);
        BOOST_TEST(adam.weight_decay == (kind == OptimizerKind::adamw ? 1e-2 : 0.0));
        BOOST_TEST(!adam.amsgrad);
        BOOST_TEST(!adam.maximize);
    }

    const auto rmsprop = OptimizerOptions::defaults(OptimizerKind::rmsprop);
    BOOST_TEST(rmsprop.lr == 1e-2);
    BOOST_TEST(rmsprop.alpha == 0.99);
    BOOST_TEST(rmsprop.eps == 1e-8);
    BOOST_TEST(rmsprop.weight_decay == 0.0);
    BOOST_TEST(rmsprop.momentum == 0.0);
    BOOST_TEST(!rmsprop.centered);
    BOOST_TEST(!rmsprop.maximize);

    const auto adagrad = OptimizerOptions::defaults(OptimizerKind::adagrad);
    BOOST_TEST(adagrad.lr == 1e-2);
    BOOST_TEST(adagrad.lr_decay == 0.0);
    BOOST_TEST(adagrad.weight_decay == 0.0);
    BOOST_TEST(adagrad.initial_accumulator_value == 0.0);
    BOOST_TEST(adagrad.eps == 1e-10);
    BOOST_TEST(!adagrad.maximize);

    const auto lamb = OptimizerOptions::defaults(OptimizerKind::lamb);
    BOOST_TEST(lamb.lr == 1e-3);
    BOOST_TEST(lamb.beta1 == 0.9);
    BOOST_TEST(lamb.beta2 == 0.999);
    BOOST_TEST(lamb.eps == 1e-6);
    BOOST_TEST(lamb.weight_decay == 0.0);

    const auto lion = OptimizerOptions::defaults(OptimizerKind::lion);
    BOOST_TEST(lion.lr == 1e-4);
    BOOST_TEST(lion.beta1 == 0.9);
    BOOST_TEST(lion.beta2 == 0.99);
    BOOST_TEST(lion.weight_decay == 0.0);

    const auto adafactor = OptimizerOptions::defaults(OptimizerKind::adafactor); // torch.optim.Adafactor
    BOOST_TEST(adafactor.lr == 1e-2);
    BOOST_TEST(adafactor.beta2_decay == -0.8);
    BOOST_TEST(adafactor.eps == 0.0); // eps1 None
    BOOST_TEST(adafactor.eps2 == 1e-3);
    BOOST_TEST(adafactor.clip_threshold == 1.0);
    BOOST_TEST(adafactor.weight_decay == 0.0);

    const auto nadam = OptimizerOptions::defaults(OptimizerKind::nadam);
    BOOST_TEST(nadam.lr == 2e-3);
    BOOST_TEST(nadam.beta1 == 0.9);
    BOOST_TEST(nadam.beta2 == 0.999);
    BOOST_TEST(nadam.eps == 1e-8);
    BOOST_TEST(nadam.momentum_decay == 4e-3);
    BOOST_TEST(!nadam.decoupled_weight_decay);

    const auto adamax = OptimizerOptions::defaults(OptimizerKind::adamax);
    BOOST_TEST(adamax.lr == 2e-3);
    BOOST_TEST(adamax.eps == 1e-8);

    const auto adadelta = OptimizerOptions::defaults(OptimizerKind::adadelta);
    BOOST_TEST(adadelta.lr == 1.0);
    BOOST_TEST(adadelta.rho == 0.9);
    BOOST_TEST(adadelta.eps == 1e-6);

    const auto muon = OptimizerOptions::defaults(OptimizerKind::muon); // torch.optim.Muon, AdamW's for the rest
    BOOST_TEST(muon.lr == 1e-3);
    BOOST_TEST(muon.weight_decay == 0.1);
    BOOST_TEST(muon.momentum == 0.95);
    BOOST_TEST(muon.nesterov);
    BOOST_TEST(muon.eps == 1e-7);
    BOOST_TEST(muon.ns_steps == 5);
    BOOST_TEST(muon.ns_a == 3.4445);
    BOOST_TEST(muon.ns_b == -4.7750);
    BOOST_TEST(muon.ns_c == 2.0315);
    BOOST_TEST(int(muon.adjust_lr) == int(MuonLrAdjust::original));
    BOOST_TEST(muon.adamw_lr == 1e-3);
    BOOST_TEST(muon.adamw_weight_decay == 1e-2);
    BOOST_TEST(muon.adamw_eps == 1e-8);

    for (int k = 0; k <= int(OptimizerKind::muon); ++k) {
        const auto o = OptimizerOptions::defaults(OptimizerKind(k));
        BOOST_TEST(int(o.kind) == k);
        BOOST_CHECK_NO_THROW(o.validate());
    }
}

BOOST_AUTO_TEST_CASE(kind_names) {
    BOOST_TEST(std::string(optimizer_kind_name(OptimizerKind::sgd)) == "sgd");
    BOOST_TEST(std::string(optimizer_kind_name(OptimizerKind::adamw)) == "adamw");
    BOOST_TEST(std::string(optimizer_kind_name(OptimizerKind::lamb)) == "lamb");
    BOOST_TEST(std::string(optimizer_kind_name(OptimizerKind::muon)) == "muon");
    BOOST_TEST(std::string(optimizer_kind_name(OptimizerKind::adadelta)) == "adadelta");
    BOOST_TEST(std::string(state_precision_name(StatePrecision::bits8)) == "8bit");
    BOOST_TEST(std::string(optimizer_kind_name(OptimizerKind(99))) == "invalid-optimizer");
}

struct BadOptions {
    const char *field; // the message must start with it
    OptimizerKind kind;
    std::function<void(OptimizerOptions &)> spoil;
};

BOOST_AUTO_TEST_CASE(invalid_options_name_the_field) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<BadOptions> cases = {
        {"lr", OptimizerKind::sgd, [](auto &o) { o.lr = -0.1; }},
        {"lr", OptimizerKind::adam, [=](auto &o) { o.lr = nan; }},
        {"weight_decay", OptimizerKind::adamw, [](auto &o) { o.weight_decay = -1e-2; }},
        {"momentum", OptimizerKind::sgd, [](auto &o) { o.momentum = -0.9; }},
        {"nesterov", OptimizerKind::sgd, [](auto &o) { o.nesterov = true; }},
        {"nesterov", OptimizerKind::sgd, [](auto &o) { o.nesterov = true, o.momentum = 0.9, o.dampening = 0.1; }},
        {"nesterov", OptimizerKind::adam, [](auto &o) { o.nesterov = true; }},
        {"beta1", OptimizerKind::adam, [](auto &o) { o.beta1 = 1.0; }},
        {"beta1", OptimizerKind::lamb, [](auto &o) { o.beta1 = -0.1; }},
        {"beta2", OptimizerKind::adamw, [](auto &o) { o.beta2 = 1.5; }},
        {"eps", OptimizerKind::adam, [](auto &o) { o.eps = -1e-8; }},
        {"amsgrad", OptimizerKind::lamb, [](auto &o) { o.amsgrad = true; }},
        {"alpha", OptimizerKind::rmsprop, [](auto &o) { o.alpha = -0.5; }},
        {"alpha", OptimizerKind::rmsprop, [](auto &o) { o.alpha = 1.5; }},
        {"momentum", OptimizerKind::rmsprop, [](auto &o) { o.momentum = -1.0; }},
        {"centered", OptimizerKind::adam, [](auto &o) { o.centered = true; }},
        {"lr_decay", OptimizerKind::adagrad, [](auto &o) { o.lr_decay = -0.1; }},
        {"initial_accumulator_value", OptimizerKind::adagrad, [](auto &o) { o.initial_accumulator_value = -1; }},
        {"eps", OptimizerKind::adagrad, [](auto &o) { o.eps = std::numeric_limits<double>::infinity(); }},
        {"kind", OptimizerKind::sgd, [](auto &o) { o.kind = OptimizerKind(42); }},
        {"beta1", OptimizerKind::lion, [](auto &o) { o.beta1 = 1.5; }},
        {"beta2_decay", OptimizerKind::adafactor, [](auto &o) { o.beta2_decay = 0.5; }},
        {"clip_threshold", OptimizerKind::adafactor, [](auto &o) { o.clip_threshold = 0.5; }},
        {"eps2", OptimizerKind::adafactor, [](auto &o) { o.eps2 = -1.0; }},
        {"momentum_decay", OptimizerKind::nadam, [](auto &o) { o.momentum_decay = -1.0; }},
        {"decoupled_weight_decay", OptimizerKind::adam, [](auto &o) { o.decoupled_weight_decay = true; }},
        {"beta2", OptimizerKind::adamax, [](auto &o) { o.beta2 = 1.0; }},
        {"rho", OptimizerKind::adadelta, [](auto &o) { o.rho = 1.5; }},
        {"ns_steps", OptimizerKind::muon, [](auto &o) { o.ns_steps = 100; }},
        {"adjust_lr", OptimizerKind::muon, [](auto &o) { o.adjust_lr = MuonLrAdjust(7); }},
        {"adamw_lr", OptimizerKind::muon, [](auto &o) { o.adamw_lr = -1.0; }},
        {"nesterov", OptimizerKind::muon, [](auto &o) { o.momentum = 0.0; }},
        {"state_precision", OptimizerKind::lamb, [](auto &o) { o.state_precision = StatePrecision::bits8; }},
        {"state_precision", OptimizerKind::sgd, [](auto &o) { o.state_precision = StatePrecision::bits4; }},
        {"state_precision", OptimizerKind::adam, [](auto &o) { o.state_precision = StatePrecision(3); }},
        {"amsgrad", OptimizerKind::adamw, [](auto &o) { o.amsgrad = true, o.state_precision = StatePrecision::bits8; }},
    };
    for (const auto &c : cases) {
        OptimizerOptions o = OptimizerOptions::defaults(c.kind);
        c.spoil(o);
        const std::string prefix = std::string(c.field) + " ";
        auto names_field = [&](const Error &e) {
            BOOST_TEST_INFO(e.what());
            return e.code() == ErrorCode::invalid_argument && std::string(e.what()).rfind(prefix, 0) == 0;
        };
        BOOST_TEST_CONTEXT(optimizer_kind_name(c.kind) << " " << c.field) {
            BOOST_CHECK_EXCEPTION(o.validate(), Error, names_field);
            BOOST_CHECK_EXCEPTION(Optimizer::create(o), Error, names_field);
        }
    }
}

BOOST_AUTO_TEST_CASE(set_lr_validates_and_keeps_the_old_value_on_error) {
    auto optimizer = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adam));
    optimizer->set_lr(0.5);
    BOOST_TEST(optimizer->options().lr == 0.5);
    BOOST_CHECK_THROW(optimizer->set_lr(-1.0), Error);
    BOOST_TEST(optimizer->options().lr == 0.5);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rules)

BOOST_AUTO_TEST_CASE(state_layout) {
    auto options = OptimizerOptions::defaults(OptimizerKind::sgd);
    BOOST_TEST(Optimizer::create(options)->state_slots() == 0);
    options.momentum = 0.9;
    BOOST_TEST(Optimizer::create(options)->state_slots() == 1);

    options = OptimizerOptions::defaults(OptimizerKind::adam);
    BOOST_TEST(Optimizer::create(options)->state_slots() == 2);
    options.amsgrad = true;
    BOOST_TEST(Optimizer::create(options)->state_slots() == 3);

    options = OptimizerOptions::defaults(OptimizerKind::rmsprop);
    BOOST_TEST(Optimizer::create(options)->state_slots() == 1);
    options.momentum = 0.9;
    options.centered = true;
    BOOST_TEST(Optimizer::create(options)->state_slots() == 3);

    options = OptimizerOptions::defaults(OptimizerKind::adagrad);
    options.initial_accumulator_value = 0.25;
    auto adagrad = Optimizer::create(options);
    BOOST_TEST(adagrad->state_slots() == 1);
    BOOST_TEST(adagrad->state_initial_value(0) == 0.25);

    auto lamb = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::lamb));
    BOOST_TEST(lamb->state_slots() == 2);
    BOOST_TEST(lamb->tensor_stats() == 2);
    BOOST_TEST(Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adam))->tensor_stats() == 0);

    TensorShape matrix, vector;
    matrix.count = 12;
    matrix.rows = 3;
    vector.count = 5;
    BOOST_TEST(Optimizer::create(OptimizerOptions::defaults(OptimizerKind::lion))->state_slots() == 1);
    BOOST_TEST(Optimizer::create(OptimizerOptions::defaults(OptimizerKind::nadam))->state_slots() == 2);
    BOOST_TEST(Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adamax))->state_slots() == 2);
    BOOST_TEST(Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adadelta))->state_slots() == 2);
    auto adafactor = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adafactor));
    BOOST_TEST(adafactor->state_slots(matrix) == 0); // factored: rows + cols per tensor
    BOOST_TEST(adafactor->tensor_state(matrix) == 7u);
    BOOST_TEST(adafactor->state_slots(vector) == 1);
    BOOST_TEST(adafactor->stat_phases() == 2);
    BOOST_TEST(adafactor->phase_stats(0, matrix) == 8u); // |p|^2, 3 row sums, 4 column sums
    BOOST_TEST(adafactor->phase_stats(1, matrix) == 1u);
    auto muon = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::muon));
    BOOST_TEST(muon->state_slots(matrix) == 1);
    BOOST_TEST(muon->state_slots(vector) == 2);
    BOOST_TEST(muon->transforms_matrices());
    BOOST_TEST(muon->has_first_phase());

    options = OptimizerOptions::defaults(OptimizerKind::adam);
    options.state_precision = StatePrecision::bits8;
    auto adam8 = Optimizer::create(options);
    TensorShape big;
    big.count = 4096;
    BOOST_TEST(adam8->state_slots() == 2);
    BOOST_TEST(adam8->lowbit_block() == 256u);
    BOOST_TEST(adam8->quantized(0, big));
    BOOST_TEST(adam8->quantized(1, big));
    big.count = 4095; // bitsandbytes' min_8bit_size: smaller tensors keep full-precision state
    BOOST_TEST(!adam8->quantized(0, big));
    BOOST_TEST(int(adam8->phase_op(0)) == int(ReduceOp::max));
    options.state_precision = StatePrecision::bits4;
    BOOST_TEST(Optimizer::create(options)->lowbit_block() == 128u);
}

BOOST_AUTO_TEST_CASE(bad_segments_and_calls_are_refused) {
    auto adam = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adam));
    std::vector<float> p(4, 1.0f), g(4, 0.5f), m(4), v(4);
    Segment<float> seg;
    seg.param = p.data();
    seg.grad = g.data();
    seg.state[0] = m.data();
    seg.count = p.size();
    auto code_is = [](ErrorCode code) { return [code](const Error &e) { return e.code() == code; }; };

    BOOST_CHECK_EXCEPTION(adam->apply(seg, 1, nullptr), Error, code_is(ErrorCode::invalid_argument)); // no v
    seg.state[1] = v.data();
    BOOST_CHECK_EXCEPTION(adam->apply(seg, 0, nullptr), Error, code_is(ErrorCode::invalid_argument)); // step 0
    double stats[2] = {};
    BOOST_CHECK_EXCEPTION(adam->begin_step(seg, 1, stats), Error, code_is(ErrorCode::internal));
    BOOST_CHECK_NO_THROW(adam->apply(seg, 1, nullptr));

    auto lamb = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::lamb));
    BOOST_CHECK_EXCEPTION(lamb->apply(seg, 1, nullptr), Error, code_is(ErrorCode::invalid_argument));

    Segment<float> empty; // nothing to update: no pointers needed
    BOOST_CHECK_NO_THROW(adam->apply(empty, 1, nullptr));
}

BOOST_AUTO_TEST_SUITE_END()
