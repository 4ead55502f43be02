// Checkpoints of pipeline grids: each stage saves its own tensors under the whole model's layout;
// a pp = 2 checkpoint loads at pp = 4 and into plain DDP over the whole model, and training
// resumed there ends where uninterrupted single-process training does (f64, <= 1e-12).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <unistd.h>

#include "pipeline_training.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;
using namespace shardopt::testing;
namespace fs = std::filesystem;

namespace {

constexpr int kBefore = 20, kAfter = 20, kMicro = 4;

double max_abs_diff(const std::vector<double> &a, const std::vector<double> &b) {
    if (a.size() != b.size()) return INFINITY;
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("shardopt-pipeline-ckpt-" + std::to_string(::getpid()));
    TempDir() { fs::remove_all(path); }
    ~TempDir() { fs::remove_all(path); }
};

PipelineSetup pipeline(int pp, PipelineSchedule schedule, int dp = 1, Strategy inner = Strategy::ddp) {
    PipelineSetup p;
    p.pp = pp;
    p.dp = dp;
    p.inner = inner;
    p.pipeline.schedule = schedule;
    p.pipeline.num_micro_batches = kMicro;
    p.pipeline.virtual_stages = schedule == PipelineSchedule::interleaved_1f1b ? 2 : 1;
    return p;
}

TrainingSetup setup_of(int steps) {
    TrainingSetup s;
    s.steps = steps;
    s.accumulation = kMicro;
    return s;
}

// Saves after kBefore steps of `from`.
void save_pipeline(const PipelineSetup &from, const std::string &dir, CheckpointForm form) {
    train_pipeline(setup_of(kBefore), from, nullptr,
                   [&](ShardedOptimizer &opt, examples::MlpPipelineStage &) { opt.save(dir, form); });
}

// Plain DDP over the whole model on `ranks` ranks: loads `dir`, trains kAfter more steps.
std::vector<double> resume_as_ddp(const std::string &dir, int ranks) {
    const TrainingSetup setup = setup_of(kAfter);
    const auto data = examples::make_blobs(setup.samples, setup.shape.inputs, setup.shape.classes);
    const auto tensors = examples::mlp_tensors(setup.shape);
    std::vector<double> result;
    std::vector<std::int64_t> loaded_steps(std::size_t(ranks), -1);
    std::mutex mu;
    run_inprocess(ranks, [&](Communicator &comm) {
        ParameterSet layout(DType::f64);
        for (const auto &[name, count] : tensors) layout.add(name, count);
        ShardingOptions o;
        o.gradient_accumulation_steps = kMicro;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, setup.optimizer, o);
        opt->load(dir);
        loaded_steps[std::size_t(comm.rank())] = opt->step_count(); // checked below: Boost.Test is not thread-safe
        const std::size_t n = setup.shape.parameter_count();
        std::vector<double> params(n), grad(n);
        const std::int64_t samples = std::int64_t(setup.samples);
        for (int step = 0; step < setup.steps; ++step)
            for (int m = 0; m < kMicro; ++m) {
                opt->get_parameters(params.data());
                const std::int64_t lo = samples * m / kMicro, hi = samples * (m + 1) / kMicro;
                const BatchSlice slice = batch_slice(lo, hi - lo, comm.rank(), comm.size());
                const auto idx = slice.indices();
                examples::mlp_loss_grad<double>(setup.shape, data, params.data(), grad.data(), idx.data(), idx.size());
                opt->zero_grad();
                std::size_t at = 0;
                for (int t = 0; t < opt->layout().tensor_count(); ++t) {
                    auto *g = static_cast<double *>(opt->grad(t));
                    for (std::size_t i = 0; i < opt->layout().tensor(t).count; ++i) g[i] = grad[at + i] * slice.weight;
                    at += opt->layout().tensor(t).count;
                }
                opt->step();
            }
        opt->get_parameters(params.data());
        std::lock_guard<std::mutex> lock(mu);
        if (comm.rank() == 0) result = params;
    });
    for (const auto step : loaded_steps) BOOST_TEST(step == kBefore);
    return result;
}

std::vector<double> resume_pipeline(const std::string &dir, const PipelineSetup &to) {
    // Rank threads only record (Boost.Test's assertions are not thread-safe); the checks follow.
    std::mutex mu;
    std::vector<std::int64_t> loaded_steps;
    auto result = train_pipeline(setup_of(kAfter), to, [&](ShardedOptimizer &opt, examples::MlpPipelineStage &) {
        opt.load(dir);
        std::lock_guard<std::mutex> lock(mu);
        loaded_steps.push_back(opt.step_count());
    });
    BOOST_TEST(loaded_steps.size() == std::size_t(to.pp * to.dp));
    for (const auto step : loaded_steps) BOOST_TEST(step == kBefore);
    return result;
}

} // namespace

BOOST_AUTO_TEST_SUITE(pipeline_checkpoint)

BOOST_AUTO_TEST_CASE(pp2_loads_at_pp4_and_as_ddp) {
    const auto reference = train_single_process<double>(setup_of(kBefore + kAfter));
    for (CheckpointForm form : {CheckpointForm::sharded, CheckpointForm::consolidated}) {
        TempDir dir;
        save_pipeline(pipeline(2, PipelineSchedule::one_f_one_b, 2, Strategy::zero2), dir.path.string(), form);
        const double at_pp4 = max_abs_diff(resume_pipeline(dir.path.string(), pipeline(4, PipelineSchedule::gpipe)), reference);
        const double as_ddp = max_abs_diff(resume_as_ddp(dir.path.string(), 2), reference);
        BOOST_TEST_MESSAGE("form " << int(form) << ": resumed at pp=4 " << at_pp4 << ", as DDP " << as_ddp);
        BOOST_TEST(at_pp4 <= 1e-12);
        BOOST_TEST(as_ddp <= 1e-12);
        if (form == CheckpointForm::consolidated) BOOST_TEST(fs::exists(dir.path / "model.safetensors"));
    }
}

// Interleaved stages hold tensors out of model order (fc1.weight and fc2.weight on stage 0):
// matched by name, the checkpoint still loads into whole-model DDP and back into FSDP stages.
BOOST_AUTO_TEST_CASE(interleaved_stages_by_name) {
    const auto reference = train_single_process<double>(setup_of(kBefore + kAfter));
    TempDir dir;
    save_pipeline(pipeline(2, PipelineSchedule::interleaved_1f1b), dir.path.string(), CheckpointForm::sharded);
    const double as_ddp = max_abs_diff(resume_as_ddp(dir.path.string(), 1), reference);
    const double at_pp2 =
        max_abs_diff(resume_pipeline(dir.path.string(), pipeline(2, PipelineSchedule::one_f_one_b, 2, Strategy::fsdp)),
                     reference);
    BOOST_TEST_MESSAGE("interleaved: resumed as DDP " << as_ddp << ", at pp=2 x dp=2 fsdp " << at_pp2);
    BOOST_TEST(as_ddp <= 1e-12);
    BOOST_TEST(at_pp2 <= 1e-12);
}

// A stage whose tensor the checkpoint lacks is refused on every rank, naming the tensor.
BOOST_AUTO_TEST_CASE(missing_tensor_refused) {
    TempDir dir;
    save_pipeline(pipeline(2, PipelineSchedule::gpipe), dir.path.string(), CheckpointForm::sharded);
    std::mutex mu;
    int refused = 0;
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet layout(DType::f64);
        if (comm.rank() == 0) layout.add("fc1.weight", 512), layout.add("fc1.bias", 32);
        else layout.add("fc2.weight", 128), layout.add("fc9.bias", 4);
        ShardingOptions o;
        o.strategy = Strategy::hybrid;
        o.pipeline_parallel_size = 2;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::adam), o);
        try {
            opt->load(dir.path.string());
        } catch (const Error &e) {
            std::lock_guard<std::mutex> lock(mu);
            BOOST_TEST_MESSAGE("rank " << comm.rank() << ": " << e.what());
            if (e.code() == ErrorCode::invalid_argument && std::string(e.what()).find("no tensor 'fc9.bias'") != std::string::npos)
                ++refused;
        }
    });
    BOOST_TEST(refused == 2);
}

BOOST_AUTO_TEST_SUITE_END()
