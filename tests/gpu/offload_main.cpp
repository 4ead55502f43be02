// ZeRO-Offload on a GPU communicator (ShardingOptions::cpu_offload_*, docs/offload.md): every
// process runs this as one rank (tools/shardopt-run -n N -- offload_main --backend staged).
// For ddp, zero1, zero2 and fsdp it trains the same model once in device memory without offload
// (the baseline) and once per offload mode (optimizer; optimizer+gradients; for fsdp also
// +params, and all three), 5 Adam steps with clipping, and checks:
//   - the reports and parameters against the baseline's: every step applied, its grad_norm the
//     same double (the offloaded norm is summed on the host in the kernels' order), and the final
//     parameters bit for bit the same with --exact (the CUDA stand-in, whose kernels are the CPU
//     rules' arithmetic compiled for the host); on a GPU, where the fused kernels may round a
//     step's update up to 2 ulp away from the CPU rule, within kTolerance;
//   - stream ordering: the optimizer runs on a non-blocking stream of the driver's own, the
//     gradients arrive by cudaMemcpyAsync from pinned memory on it and the parameters are read
//     back the same way after gather(b), with no synchronization in between: a copy or an update
//     that the device did not wait for shows up as a wrong number (the stand-in runs every stream
//     late, so it does);
//   - memory_stats(): the device bytes per rank are the formulas of docs/offload.md (optimizer
//     state and master weights gone from the device; gradients too with cpu_offload_gradients,
//     the parameter shard with cpu_offload_params), and so are the host bytes;
//   - checkpoints: the offloaded optimizer's serialize() restores a fresh baseline and the
//     baseline's restores a fresh offloaded one; one more step on each ends bit for bit alike
//     (--exact) or within kTolerance.
// One line per case: "PASS strategy=zero2 mode=optimizer+gradients ranks=2 device_bytes=... ".
//
//   offload_main --backend staged|nccl [--exact] [--steps N] [--strategy S]... [--verbose]
//
// Exit codes: 0 passed; 77 (skipped) without a usable device or backend, decided by every rank
// alike before joining; 1 on a failure; 2 on bad arguments.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "shardopt/bootstrap.hpp"
#include "driver_support.hpp"
#include "shardopt/device_optimizer.hpp"
#include "shardopt/error.hpp"
#include "shardopt/gpu_comm.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::cuda_ok;
using shardopt::testing::gpu_skip_reason;

namespace {

// max |offloaded - baseline| / (1 + |baseline|) on a GPU: the fused kernels match the CPU rule
// within 2 ulp per step (tests/gpu), a few steps of Adam at lr 1e-3 stay far below this, while a
// lost update, a stale gradient or a wrong shard moves parameters by about lr.
constexpr double kTolerance = 1e-5;

// Several buckets of odd sizes; the last so small that at 4 ranks some own none of it.
ParameterSet model_layout() {
    ParameterSet layout(DType::f32, 16384);
    layout.add("w1", 3001);
    layout.add("b1", 17);
    layout.add("w2", 1200);
    layout.end_bucket();
    layout.add("w3", 640);
    layout.add("b3", 5);
    layout.end_bucket();
    layout.add("tiny", 3);
    return layout;
}

std::vector<float> initial_values(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f * std::sin(0.37f * float(i) + 0.1f);
    return v;
}

// Depends on the parameters, the rank and the step: a stale parameter, a wrong shard or a
// gradient that did not arrive all change the result.
float gradient(float w, std::size_t i, int rank, int step) {
    return std::cos(w * float(rank + 1) + 0.1f * float(step)) + 0.01f * float(i % 7) - 0.3f * w;
}

// Page-locked host memory: cudaMemcpyAsync from and to it is truly asynchronous.
struct Pinned {
    float *data = nullptr;
    explicit Pinned(std::size_t n) { cuda_ok(cudaMallocHost(reinterpret_cast<void **>(&data), n * sizeof(float)), "cudaMallocHost"); }
    ~Pinned() { (void)cudaFreeHost(data); }
    Pinned(const Pinned &) = delete;
    Pinned &operator=(const Pinned &) = delete;
};

struct Mode {
    std::string name;
    bool optimizer = false, gradients = false, params = false;
};

std::vector<Mode> modes_of(Strategy s) {
    std::vector<Mode> m = {{"none"}, {"optimizer", true}, {"optimizer+gradients", true, true}};
    if (s == Strategy::fsdp) {
        m.push_back({"optimizer+params", true, false, true});
        m.push_back({"optimizer+gradients+params", true, true, true});
    }
    return m;
}

ShardingOptions options_of(Strategy s, const Mode &m, cudaStream_t stream) {
    ShardingOptions o;
    o.strategy = s;
    o.memory = MemorySpace::cuda;
    o.cuda_stream = stream;
    o.max_grad_norm = 0.5; // the norm decides every step's scale
    o.cpu_offload_optimizer = m.optimizer;
    o.cpu_offload_gradients = m.gradients;
    o.cpu_offload_params = m.params;
    return o;
}

// The driver's view of one step: the packed parameters read through gather() (device memory,
// async on the optimizer's stream), gradients written the same way.
struct Driver {
    cudaStream_t stream;
    int rank;
    Pinned host_params, host_grad;
    std::unique_ptr<Pinned> late_read; // the full padded buffer, made on first use
    bool late_read_differs = false;
    explicit Driver(cudaStream_t s, int r, std::size_t n) : stream(s), rank(r), host_params(n), host_grad(n) {}

    std::vector<std::size_t> packed_offsets(const ParameterSet &layout) const {
        std::vector<std::size_t> off(std::size_t(layout.bucket_count()), 0);
        for (int b = 1; b < layout.bucket_count(); ++b) off[std::size_t(b)] = off[std::size_t(b) - 1] + layout.bucket(b - 1).count;
        return off;
    }

    // A forward: every unit gathered and read back on the stream, then released.
    std::vector<float> read(ShardedOptimizer &opt) {
        const ParameterSet &layout = opt.layout();
        const auto off = packed_offsets(layout);
        for (int b = 0; b < layout.bucket_count(); ++b) {
            const void *unit = opt.gather(b);
            cuda_ok(cudaMemcpyAsync(host_params.data + off[std::size_t(b)], unit, layout.bucket(b).count * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync of a unit to the host");
            opt.release(b);
        }
        cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize after the forward");
        return std::vector<float>(host_params.data, host_params.data + layout.element_count());
    }

    // A backward from `params`, last bucket first, each bucket marked ready once it is written.
    StepResult step(ShardedOptimizer &opt, const std::vector<float> &params, int step) {
        const ParameterSet &layout = opt.layout();
        const auto off = packed_offsets(layout);
        // The host buffer is reused every step: the last step's copies out of it are done.
        cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize before the backward");
        for (std::size_t i = 0; i < params.size(); ++i) host_grad.data[i] = gradient(params[i], i, rank, step);
        opt.zero_grad();
        for (int b = layout.bucket_count() - 1; b >= 0; --b) {
            cuda_ok(cudaMemcpyAsync(opt.bucket_grad(b), host_grad.data + off[std::size_t(b)],
                                    layout.bucket(b).count * sizeof(float), cudaMemcpyHostToDevice, stream),
                    "cudaMemcpyAsync of a gradient to the device");
            opt.grad_ready(b);
        }
        // A read of the parameters still queued on the stream when step() runs (a late kernel of
        // the caller's): the update's copies to the device must not overtake it.
        const bool full = opt.strategy() != Strategy::fsdp;
        if (full && !late_read) late_read = std::make_unique<Pinned>(layout.padded_count());
        if (full)
            cuda_ok(cudaMemcpyAsync(late_read->data, opt.parameters(), layout.padded_count() * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync of the parameters before step()");
        const StepResult r = opt.step();
        if (full) {
            cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize after step()");
            std::size_t packed = 0;
            for (const auto &tl : layout.tensors()) {
                if (std::memcmp(late_read->data + tl.offset, params.data() + packed, tl.count * sizeof(float)) != 0)
                    late_read_differs = true;
                packed += tl.count;
            }
        }
        return r;
    }
};

struct Run {
    std::vector<double> norms;
    std::vector<float> params; // after the last step, through get_parameters
    MemoryStats memory;
};

Run train(ShardedOptimizer &opt, Driver &d, int steps, std::vector<std::string> &failures) {
    Run run;
    for (int s = 0; s < steps; ++s) {
        const std::vector<float> params = d.read(opt);
        d.late_read_differs = false;
        const StepResult r = d.step(opt, params, s);
        if (!r.applied) failures.push_back("step " + std::to_string(s) + " was not applied");
        if (d.late_read_differs)
            failures.push_back("step " + std::to_string(s) +
                               ": a read of the parameters queued before step() saw values step() wrote");
        run.norms.push_back(r.grad_norm);
    }
    // Read through gather() right after the last step (no synchronization): the copies back to
    // the device must be ordered before the reads.
    const std::vector<float> gathered = d.read(opt);
    run.params.resize(opt.layout().element_count());
    opt.get_parameters(run.params.data());
    if (std::memcmp(gathered.data(), run.params.data(), gathered.size() * sizeof(float)) != 0)
        failures.push_back("the parameters read through gather() after step() differ from get_parameters()");
    run.memory = opt.memory_stats();
    return run;
}

double max_rel_diff(const std::vector<float> &a, const std::vector<float> &b) {
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = std::abs(double(a[i]) - double(b[i])) / (1.0 + std::abs(double(b[i])));
        if (!(d <= worst)) worst = d;
    }
    return a.size() == b.size() ? worst : INFINITY;
}

// What memory_stats() must say: docs/offload.md's formulas, from the layout alone.
void check_memory(const ShardedOptimizer &opt, Strategy s, const Mode &m, const MemoryStats &got,
                  std::vector<std::string> &failures) {
    const ParameterSet &layout = opt.layout();
    const std::size_t N = layout.padded_count() * 4, S = layout.shard_count() * 4;
    const bool sharded = s != Strategy::ddp, grads_sharded = s == Strategy::zero2 || s == Strategy::fsdp;
    std::size_t owned = 0; // elements this rank updates
    if (!sharded) owned = layout.element_count();
    else
        for (const auto &bl : layout.buckets()) {
            const std::size_t begin = std::size_t(opt.data_group()->rank()) * bl.shard;
            owned += bl.count > begin ? std::min(bl.shard, bl.count - begin) : 0;
        }
    const std::size_t adam = owned * 4 * 2, region = sharded ? S : N;
    auto expect = [&](const char *field, std::size_t have, std::size_t want) {
        if (have != want)
            failures.push_back(std::string("memory_stats().") + field + " " + std::to_string(have) + ", want " +
                               std::to_string(want));
    };
    expect("params_bytes", got.params_bytes, m.params ? 0 : s == Strategy::fsdp ? S : N);
    expect("grads_bytes", got.grads_bytes, m.gradients ? 0 : grads_sharded ? S : N);
    expect("optimizer_state_bytes", got.optimizer_state_bytes, m.optimizer ? 0 : adam);
    expect("host_params_bytes", got.host_params_bytes, m.params ? S : 0);
    expect("host_grads_bytes", got.host_grads_bytes, m.optimizer ? region : 0);
    expect("host_optimizer_state_bytes", got.host_optimizer_state_bytes,
           m.optimizer ? adam + (m.params ? 0 : region) : 0);
}

struct Args {
    std::string backend;
    std::vector<std::string> strategies;
    int steps = 5;
    bool exact = false, verbose = false;
};

int usage(const char *prog) {
    std::fprintf(stderr, "usage: %s --backend staged|nccl [--exact] [--steps N] [--strategy ddp|zero1|zero2|fsdp]... [--verbose]\n",
                 prog);
    return 2;
}

// One strategy: the baseline and every offload mode; returns the failures, each printed.
int run_strategy(const CommunicatorPtr &comm, Strategy s, cudaStream_t stream, const Args &args) {
    const int rank = comm->rank(), ranks = comm->size();
    const OptimizerOptions adam = OptimizerOptions::defaults(OptimizerKind::adam);
    ParameterSet planned = model_layout();
    planned.plan(1);
    const std::vector<float> init = initial_values(planned.element_count());
    Driver driver(stream, rank, init.size());
    Run baseline;
    std::vector<unsigned char> baseline_bytes;
    int failed = 0;
    for (const Mode &m : modes_of(s)) {
        std::vector<std::string> failures;
        const ShardingOptions options = options_of(s, m, stream);
        auto opt = ShardedOptimizer::create(comm, model_layout(), adam, options, init.data());
        Run run = train(*opt, driver, args.steps, failures);
        check_memory(*opt, s, m, run.memory, failures);
        double diff = 0.0;
        if (m.name == "none") {
            baseline = run;
            baseline_bytes = opt->serialize();
        } else {
            for (int i = 0; i < args.steps; ++i) {
                const double want = baseline.norms[std::size_t(i)], have = run.norms[std::size_t(i)];
                const bool same = args.exact || i == 0 ? have == want : std::abs(have - want) <= kTolerance * want;
                if (!same) {
                    char text[160];
                    std::snprintf(text, sizeof text, "step %d: grad_norm %.17g, the baseline's %.17g", i, have, want);
                    failures.push_back(text);
                }
            }
            diff = max_rel_diff(run.params, baseline.params);
            if (args.exact ? std::memcmp(run.params.data(), baseline.params.data(), run.params.size() * 4) != 0
                           : !(diff <= kTolerance))
                failures.push_back("final parameters differ from the baseline's: max rel diff " + std::to_string(diff));
            if (!(m.optimizer && run.memory.total() < baseline.memory.total()))
                failures.push_back("device bytes " + std::to_string(run.memory.total()) + " not below the baseline's " +
                                   std::to_string(baseline.memory.total()));
            // Checkpoints both ways, then one more step each from the same parameters.
            const std::vector<unsigned char> mine = opt->serialize();
            auto restored_baseline = ShardedOptimizer::create(comm, model_layout(), adam, options_of(s, modes_of(s)[0], stream));
            restored_baseline->deserialize(mine);
            auto restored_offload = ShardedOptimizer::create(comm, model_layout(), adam, options);
            restored_offload->deserialize(baseline_bytes);
            opt->deserialize(baseline_bytes);
            std::vector<float> a(init.size()), b(init.size());
            restored_baseline->get_parameters(a.data());
            if (std::memcmp(a.data(), run.params.data(), a.size() * 4) != 0)
                failures.push_back("a baseline restored from the offloaded checkpoint holds other parameters");
            const std::vector<float> from = baseline.params;
            driver.step(*restored_offload, from, args.steps);
            driver.step(*opt, from, args.steps);
            auto reference = ShardedOptimizer::create(comm, model_layout(), adam, options_of(s, modes_of(s)[0], stream));
            reference->deserialize(baseline_bytes);
            driver.step(*reference, from, args.steps);
            restored_offload->get_parameters(a.data());
            reference->get_parameters(b.data());
            const double resumed = max_rel_diff(a, b);
            if (args.exact ? std::memcmp(a.data(), b.data(), a.size() * 4) != 0 : !(resumed <= kTolerance))
                failures.push_back("after a restore and one more step the offloaded optimizer differs from the baseline's "
                                   "by " + std::to_string(resumed));
            opt->get_parameters(b.data());
            if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0)
                failures.push_back("deserialize() into the trained offloaded optimizer and a fresh one differ after a step");
        }
        opt.reset();
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the case");
        for (const std::string &f : failures)
            std::printf("FAIL strategy=%s mode=%s rank=%d ranks=%d: %s\n", strategy_name(s), m.name.c_str(), rank, ranks,
                        f.c_str());
        if (!failures.empty()) ++failed;
        if (args.verbose || (failures.empty() && rank == 0))
            std::printf("%s strategy=%s mode=%s ranks=%d steps=%d max_rel_diff=%.3g device_bytes=%zu host_bytes=%zu "
                        "(params %zu grads %zu state %zu buffers %zu | host params %zu grads %zu state %zu)\n",
                        failures.empty() ? "PASS" : "FAILED", strategy_name(s), m.name.c_str(), ranks, args.steps, diff,
                        run.memory.total(), run.memory.host_total(), run.memory.params_bytes, run.memory.grads_bytes,
                        run.memory.optimizer_state_bytes, run.memory.buffer_bytes, run.memory.host_params_bytes,
                        run.memory.host_grads_bytes, run.memory.host_optimizer_state_bytes);
        std::fflush(stdout);
    }
    return failed;
}

} // namespace

int main(int argc, char **argv) {
    Args args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--backend" && i + 1 < argc) args.backend = argv[++i];
        else if (a == "--strategy" && i + 1 < argc) args.strategies.push_back(argv[++i]);
        else if (a == "--steps" && i + 1 < argc) args.steps = std::atoi(argv[++i]);
        else if (a == "--exact") args.exact = true;
        else if (a == "--verbose") args.verbose = true;
        else return usage(argv[0]);
    }
    if ((args.backend != "nccl" && args.backend != "staged") || args.steps < 1) return usage(argv[0]);
    std::vector<Strategy> strategies;
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
        if (args.strategies.empty() ||
            std::find(args.strategies.begin(), args.strategies.end(), strategy_name(s)) != args.strategies.end())
            strategies.push_back(s);
    if (strategies.size() != (args.strategies.empty() ? 4u : args.strategies.size())) return usage(argv[0]);

    BootstrapConfig config;
    try {
        config = BootstrapConfig::from_env();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAIL bad launcher environment: %s\n", e.what());
        return 1;
    }
    if (const int skip = gpu_skip_reason(args.backend, "offload", config.world_size)) return skip;

    CommunicatorPtr comm;
    cudaStream_t stream = nullptr;
    try {
        comm = args.backend == "nccl" ? gpu::create_nccl_communicator(config) : gpu::create_staged_communicator(config);
        cuda_ok(cudaSetDevice(gpu::device_of(*comm)), "cudaSetDevice");
        cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAIL cannot create the %s communicator (rank %d of %d): %s\n", args.backend.c_str(),
                     config.rank, config.world_size, e.what());
        return 1;
    }
    int failed = 0;
    for (Strategy s : strategies) {
        try {
            failed += run_strategy(comm, s, stream, args);
        } catch (const std::exception &e) {
            std::printf("FAIL strategy=%s rank=%d: %s\n", strategy_name(s), comm->rank(), e.what());
            std::fflush(stdout);
            comm->abort(std::string("offload_main: rank ") + std::to_string(comm->rank()) + " failed: " + e.what());
            return 1;
        }
    }
    // Gradient compression runs on host memory: an optimizer in device memory refuses it, naming it.
    try {
        ParameterSet layout(DType::f32);
        layout.add("w", 1000);
        ShardingOptions o = options_of(Strategy::ddp, Mode{"none"}, stream);
        o.compression.method = GradientCompression::int8;
        ShardedOptimizer::create(comm, layout, OptimizerOptions::defaults(OptimizerKind::adam), o);
        std::printf("FAIL rank=%d: an optimizer in cuda memory accepted int8 gradient compression\n", comm->rank());
        ++failed;
    } catch (const Error &e) {
        const bool named = std::string(e.what()).find("gradient compression (int8)") != std::string::npos;
        if (e.code() != ErrorCode::unsupported || !named) {
            std::printf("FAIL rank=%d: compression in cuda memory refused with the wrong error: %s\n", comm->rank(), e.what());
            ++failed;
        } else if (comm->rank() == 0) {
            std::printf("ok compression refused in cuda memory: %s\n", e.what());
        }
    }
    try {
        comm->barrier();
    } catch (const std::exception &e) {
        std::printf("FAIL final barrier (rank %d): %s\n", comm->rank(), e.what());
        return 1;
    }
    (void)cudaStreamDestroy(stream);
    if (failed) {
        std::printf("FAIL %d cases failed on rank %d\n", failed, comm->rank());
        return 1;
    }
    return 0;
}
