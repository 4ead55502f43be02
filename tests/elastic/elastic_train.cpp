// One rank of an elastic training job, for the elastic launcher tests (elastic_local_test.py,
// tests/hosts/netns_elastic.sh): the demo MLP under an ElasticOptimizer over the UCX
// communicator from the environment, step s training on the global batch s of a fixed data
// set, split over the world it finds. It resumes from the checkpoint directory
// ($SHARDOPT_CHECKPOINT_DIR) when a checkpoint is there.
//
//   elastic_train --steps N [--every K] [--strategy zero2] [--min 1] [--max 1024] [--stop-at S]
//                 [--sleep-ms MS] [--print-every P] [--out FILE] [--hidden H] [--sync-save DIR]
//                 [--compression none|bf16|fp16|int8|int4|top_k]
//
// --stop-at S: leave after step S with its checkpoint published (S a multiple of K): the first
// half of a reference run that switches world size at S. --out: rank 0 writes the final packed
// parameters there (raw f32). --hidden: the MLP's hidden width (32; larger for measurements).
// --sync-save DIR: at the end, one synchronous save() into DIR, timed, for comparison. Lines (each rank):
//   START rank R world W pid P
//   GENERATION G                         restarts of the job before this run
//   RESUMED step S | FRESH
//   FIRST_STEP step S world W wall T     after this process's first step (T: CLOCK_REALTIME s)
//   STEP S                               every P steps
//   CHECKPOINT step S snapshot_ms A write_ms B publish_ms C bytes D   (rank 0, each published)
//   DONE step N world W last_checkpoint S
//   STEP_MS plain A poll B checkpoint C    mean step() time: no checkpoint pending, one being written
//                                         (a poll), and taking one (the snapshot)
//   SYNC_SAVE_MS T                        with --sync-save
//   ERROR <code>: <message>              exit 3
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "mlp.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/elastic.hpp"
#include "shardopt/error.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;

namespace {

struct Args {
    std::int64_t steps = 100;
    int every = 10;
    Strategy strategy = Strategy::zero2;
    int min_workers = 1, max_workers = 1024;
    std::int64_t stop_at = -1;
    int sleep_ms = 0;
    int print_every = 10;
    int hidden = 32;
    std::string out, sync_save;
    GradientCompression compression = GradientCompression::none;
};

Strategy parse_strategy(const std::string &name) {
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd})
        if (name == strategy_name(s)) return s;
    throw Error(ErrorCode::invalid_argument, "unknown strategy '" + name + "'");
}

GradientCompression parse_compression(const std::string &name) {
    for (GradientCompression c : {GradientCompression::none, GradientCompression::bf16, GradientCompression::fp16,
                                  GradientCompression::int8, GradientCompression::int4, GradientCompression::top_k})
        if (name == compression_name(c)) return c;
    throw Error(ErrorCode::invalid_argument, "unknown compression '" + name + "'");
}

Args parse(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        require(i + 1 < argc, ErrorCode::invalid_argument, "missing value after " + k);
        const std::string v = argv[++i];
        if (k == "--steps") a.steps = std::stoll(v);
        else if (k == "--every") a.every = std::stoi(v);
        else if (k == "--strategy") a.strategy = parse_strategy(v);
        else if (k == "--min") a.min_workers = std::stoi(v);
        else if (k == "--max") a.max_workers = std::stoi(v);
        else if (k == "--stop-at") a.stop_at = std::stoll(v);
        else if (k == "--sleep-ms") a.sleep_ms = std::stoi(v);
        else if (k == "--print-every") a.print_every = std::stoi(v);
        else if (k == "--out") a.out = v;
        else if (k == "--hidden") a.hidden = std::stoi(v);
        else if (k == "--sync-save") a.sync_save = v;
        else if (k == "--compression") a.compression = parse_compression(v);
        else throw Error(ErrorCode::invalid_argument, "unknown option " + k);
    }
    return a;
}

double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run(const Args &a) {
    const examples::MlpShape shape{16, a.hidden, 4};
    const std::int64_t samples = 2048, batch = 96;
    const auto data = examples::make_blobs(std::size_t(samples), shape.inputs, shape.classes);
    const auto init = examples::mlp_init<float>(shape);

    CommunicatorPtr comm = create_communicator_from_env("ucx");
    const int rank = comm->rank(), world = comm->size();
    ParameterSet layout(DType::f32, 512 * sizeof(float)); // several buckets: several collectives per step
    for (auto &[name, count] : examples::mlp_tensors(shape)) layout.add(name, count);
    ShardingOptions sharding;
    sharding.strategy = a.strategy;
    sharding.compression.method = a.compression;
    ElasticOptions elastic;
    elastic.min_workers = a.min_workers;
    elastic.max_workers = a.max_workers;
    elastic.checkpoint_every = a.every;
    std::printf("START rank %d world %d pid %d\n", rank, world, int(getpid()));
    std::fflush(stdout);
    auto opt = ElasticOptimizer::create(comm, layout, OptimizerOptions::defaults(OptimizerKind::adam), sharding,
                                        elastic, init.data());
    std::printf("GENERATION %d\n", opt->generation());
    if (opt->resumed_step() >= 0) std::printf("RESUMED step %lld\n", (long long)opt->resumed_step());
    else std::printf("FRESH\n");
    std::fflush(stdout);

    ShardedOptimizer &o = opt->wrapped();
    const std::size_t n = o.layout().element_count();
    std::vector<float> params(n), grad(n);
    const std::int64_t end = a.stop_at >= 0 ? a.stop_at : a.steps;
    bool first = true;
    std::int64_t published = 0;
    double step_ms[3] = {0, 0, 0};
    std::int64_t step_n[3] = {0, 0, 0};
    for (std::int64_t s = o.step_count(); s < end; ++s) {
        // Global batch s: samples (s * batch + i) mod samples, this rank's contiguous slice.
        const BatchSlice slice = batch_slice(0, batch, rank, world);
        std::vector<std::int64_t> idx;
        for (std::int64_t i = slice.begin; i < slice.end; ++i) idx.push_back((s * batch + i) % samples);
        o.get_parameters(params.data());
        examples::mlp_loss_grad<float>(shape, data, params.data(), grad.data(), idx.data(), idx.size());
        for (float &g : grad) g = float(g * slice.weight);
        o.zero_grad();
        std::size_t at = 0;
        for (int b = 0; b < o.layout().bucket_count(); ++b) {
            const std::size_t count = o.layout().bucket(b).count;
            std::memcpy(o.bucket_grad(b), grad.data() + at, count * sizeof(float));
            at += count;
            o.grad_ready(b);
        }
        const bool pending = opt->checkpoint_pending();
        const auto started = std::chrono::steady_clock::now();
        opt->step();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
        const int kind = o.step_count() % a.every == 0 ? 2 : pending ? 1 : 0;
        step_ms[kind] += ms;
        ++step_n[kind];
        if (first) {
            std::printf("FIRST_STEP step %lld world %d wall %.6f\n", (long long)o.step_count(), world, wall_seconds());
            first = false;
        }
        if (a.print_every > 0 && o.step_count() % a.print_every == 0)
            std::printf("STEP %lld\n", (long long)o.step_count());
        const ElasticStats st = opt->stats();
        if (rank == 0 && st.checkpoints_published != published) {
            published = st.checkpoints_published;
            std::printf("CHECKPOINT step %lld snapshot_ms %.3f write_ms %.3f publish_ms %.3f bytes %zu\n",
                        (long long)opt->last_checkpoint_step(), st.snapshot_seconds * 1e3, st.write_seconds * 1e3,
                        st.publish_seconds * 1e3, st.snapshot_bytes);
        }
        std::fflush(stdout);
        if (a.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.sleep_ms));
    }
    opt->finish_checkpoint();
    o.get_parameters(params.data());
    if (rank == 0 && !a.out.empty()) {
        std::ofstream f(a.out, std::ios::binary);
        f.write(reinterpret_cast<const char *>(params.data()), std::streamsize(n * sizeof(float)));
        require(bool(f), ErrorCode::io, "cannot write " + a.out);
    }
    std::printf("DONE step %lld world %d last_checkpoint %lld\n", (long long)o.step_count(), world,
                (long long)opt->last_checkpoint_step());
    auto mean = [&](int k) { return step_n[k] ? step_ms[k] / double(step_n[k]) : 0.0; };
    std::printf("STEP_MS plain %.3f poll %.3f checkpoint %.3f\n", mean(0), mean(1), mean(2));
    if (!a.sync_save.empty()) {
        const auto started = std::chrono::steady_clock::now();
        o.save(a.sync_save);
        std::printf("SYNC_SAVE_MS %.3f\n",
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    }
    std::fflush(stdout);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    try {
        return run(parse(argc, argv));
    } catch (const Error &e) {
        std::printf("ERROR %s: %s\n", error_code_name(e.code()), e.what());
        std::fflush(stdout);
        return 3;
    } catch (const std::exception &e) {
        std::printf("ERROR %s\n", e.what());
        std::fflush(stdout);
        return 3;
    }
}
