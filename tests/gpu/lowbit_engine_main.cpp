// Low-bit optimizer state (8-bit, 4-bit: src/optim/lowbit.hpp) in the step engine's CUDA space
// against host memory, bit for bit. Every process of the job runs this as one rank
// (tools/shardopt-run -n N -- lowbit_engine_main --backend staged); on the CUDA stand-in
// (gpu_emulated.lowbit_engine.staged.np1/np2/np3) the kernels are the CPU rules' arithmetic
// compiled for the host, so with --exact the CUDA space must give the very bits of host memory. On
// a GPU, whose low-bit kernels match the CPU rule within 2 ulp of the parameters per step (tests/gpu),
// the parameters must agree within kTolerance and the state is not compared value for value.
//
// For 8-bit and 4-bit state, Adam, AdamW (weight decay) and SGD with momentum, and DDP, ZeRO-1,
// ZeRO-2 and FSDP over the whole world, and ZeRO-2 with ZeRO-Offload (cpu_offload_optimizer: the
// CPU rule over host copies of the state): the same layout as unit.lowbit_engine (quantized
// tensors of 5000, 9017 and 4096 elements, no multiple of either block but the last, and a small
// one that keeps full state), so at 2 and 3 ranks shard boundaries cut blocks and their scales
// are the maxima over every rank's part. Every rank steps on the same coarse gradients (mixed signs, exactly
// representable: the average is the same at any world size), so the reference is one host-memory
// DDP rank (unit.lowbit_engine shows host memory the same bits under every strategy and world size).
// Checked, after `steps` steps:
//   - the parameters, bit for bit;
//   - the state: the CUDA optimizer's serialize() (its state read span by span from the device,
//     decoded) loaded into a one-rank host optimizer and serialized again holds the data of the
//     reference's serialize() byte for byte (decoded state encodes back to the same codes: the
//     same values);
//   - restores into CUDA memory (write_state, split blocks scaled by the maxima over every rank's
//     part): a fresh CUDA optimizer that loaded the CUDA bytes, and one that loaded the host
//     reference's bytes, then 2 more steps on each, on the trained one and on the reference: all
//     the same parameters bit for bit;
//   - at one rank, memory_stats().optimizer_state_bytes equal to host memory's (codes and scales;
//     without offload, which moves the state to host memory).
// One line per case: "PASS 8bit adam zero2 ranks=3".
//
//   lowbit_engine_main --backend staged|nccl [--exact] [--steps N] [--verbose]
//
// Exit codes: 0 passed; 77 (skipped) without a CUDA device or the backend, decided by every rank
// alike before joining; 1 on a failure; 2 on bad arguments.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver_support.hpp"
#include "../unit/lowbit_layout.hpp"
#include "shardopt/bootstrap.hpp"
#include "shardopt/device_optimizer.hpp"
#include "shardopt/error.hpp"
#include "shardopt/gpu_comm.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::cuda_ok;
using shardopt::testing::gpu_skip_reason;
using shardopt::testing::lowbit_element_count;
using shardopt::testing::lowbit_layout;
using shardopt::testing::lowbit_rule;

namespace {

// max |cuda - host| / (1 + |host|) on a GPU: a few steps at lr 0.01 moved by ulps stay far below it,
// while a block scaled by a wrong maximum moves its elements by about a code's step (1e-3 and more).
constexpr double kTolerance = 1e-5;

std::vector<float> initial_values(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f * std::sin(0.37f * float(i) + 0.1f);
    return v;
}

// Step `step`'s gradient, the same on every rank: multiples of 1/64 in [-1/4, 1/4] of both signs
// (exact, so their average over any number of ranks is exact), with runs of zeros.
std::vector<float> gradient(std::size_t n, int step) {
    std::vector<float> g(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t h = std::uint32_t(i) * 2654435761u + std::uint32_t(step) * 40503u;
        const int k = int((h >> 16) % 33) - 16;
        g[i] = (i / 700) % 5 == 3 ? 0.0f : float(k) / 64.0f;
    }
    return g;
}

// One step on `opt` with `grad` (packed), copied into each bucket as a backward would.
void step_with(ShardedOptimizer &opt, const std::vector<float> &grad, bool device) {
    const ParameterSet &layout = opt.layout();
    std::vector<std::size_t> packed(std::size_t(layout.bucket_count()), 0);
    for (int b = 1; b < layout.bucket_count(); ++b) packed[std::size_t(b)] = packed[std::size_t(b) - 1] + layout.bucket(b - 1).count;
    opt.zero_grad();
    for (int b = layout.bucket_count() - 1; b >= 0; --b) {
        const std::size_t bytes = layout.bucket(b).count * sizeof(float);
        if (device)
            cuda_ok(cudaMemcpy(opt.bucket_grad(b), grad.data() + packed[std::size_t(b)], bytes, cudaMemcpyHostToDevice),
                    "cudaMemcpy of a gradient to the device");
        else
            std::memcpy(opt.bucket_grad(b), grad.data() + packed[std::size_t(b)], bytes);
        opt.grad_ready(b);
    }
    const StepResult r = opt.step();
    if (!r.applied) throw std::runtime_error("a step was not applied");
}

std::vector<float> parameters(ShardedOptimizer &opt) {
    std::vector<float> p(lowbit_element_count());
    opt.get_parameters(p.data());
    return p;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// "none", or how many elements differ (exact: in any bit; else by more than kTolerance) and the first.
std::string first_difference(const std::vector<float> &got, const std::vector<float> &want, bool exact) {
    if (got.size() != want.size()) return "sizes " + std::to_string(got.size()) + " and " + std::to_string(want.size());
    std::size_t count = 0, first = got.size();
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double d = std::abs(double(got[i]) - double(want[i])) / (1.0 + std::abs(double(want[i])));
        if (exact ? std::memcmp(&got[i], &want[i], sizeof(float)) != 0 : !(d <= kTolerance)) {
            if (count++ == 0) first = i;
        }
    }
    if (count == 0) return "none";
    char text[160];
    std::snprintf(text, sizeof text, "%zu elements differ, the first at %zu: %.9g, want %.9g", count, first,
                  double(got[first]), double(want[first]));
    return text;
}

// The data of serialize()'s bytes (parameters and state slots), after the header (magic, u32
// version, u32 flags, u64 header length, u64 hash, the JSON header: docs/checkpoints.md#format),
// whose metadata (the saver's generation, memory space) may differ between equal states.
std::vector<unsigned char> data_of(const std::vector<unsigned char> &bytes) {
    if (bytes.size() < 32) throw std::runtime_error("serialize() gave " + std::to_string(bytes.size()) + " bytes");
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | bytes[16 + std::size_t(i)];
    if (header > bytes.size() - 32) throw std::runtime_error("serialize()'s header is longer than its bytes");
    return std::vector<unsigned char>(bytes.begin() + std::ptrdiff_t(32 + header), bytes.end());
}

struct Args {
    std::string backend;
    int steps = 3;
    bool exact = false;
    bool verbose = false;
};

// One case on every rank alike; failures are recorded, never acted on, so every rank makes the
// same collective calls.
std::vector<std::string> run_case(const CommunicatorPtr &comm, StatePrecision precision, OptimizerKind kind,
                                  Strategy strategy, bool offload, int steps, bool exact) {
    std::vector<std::string> failures;
    const OptimizerOptions o = lowbit_rule(kind, precision);
    const std::vector<float> init = initial_values(lowbit_element_count());
    ShardingOptions device;
    device.strategy = strategy;
    device.memory = MemorySpace::cuda; // on the legacy default stream: the cudaMemcpy calls here are ordered with it
    device.cpu_offload_optimizer = offload;
    ShardingOptions host;
    host.strategy = Strategy::ddp;
    auto host_optimizer = [&](const float *params) {
        return ShardedOptimizer::create(make_inprocess_group(1)[0], lowbit_layout(), o, host, params);
    };

    auto trained = ShardedOptimizer::create(comm, lowbit_layout(), o, device, init.data());
    auto reference = host_optimizer(init.data());
    for (int s = 0; s < steps; ++s) {
        const std::vector<float> g = gradient(init.size(), s);
        step_with(*trained, g, true);
        step_with(*reference, g, false);
    }
    if (same_bits(parameters(*reference), init)) failures.push_back("the reference did not train");
    const std::string params_diff = first_difference(parameters(*trained), parameters(*reference), exact);
    if (params_diff != "none") failures.push_back("parameters after " + std::to_string(steps) + " steps: " + params_diff);
    if (comm->size() == 1 && !offload && trained->memory_stats().optimizer_state_bytes != reference->memory_stats().optimizer_state_bytes)
        failures.push_back("optimizer_state_bytes " + std::to_string(trained->memory_stats().optimizer_state_bytes) +
                           ", host memory's " + std::to_string(reference->memory_stats().optimizer_state_bytes));

    // The state, as values: the CUDA optimizer's through a one-rank host optimizer.
    const std::vector<unsigned char> device_bytes = trained->serialize();
    const std::vector<unsigned char> host_bytes = reference->serialize();
    auto through_host = host_optimizer(nullptr);
    through_host->deserialize(device_bytes);
    if (exact && data_of(through_host->serialize()) != data_of(host_bytes))
        failures.push_back("the state serialized from cuda memory differs from host memory's");

    // Restores into cuda memory, from either's bytes; then 2 more steps everywhere.
    auto from_device = ShardedOptimizer::create(comm, lowbit_layout(), o, device);
    from_device->deserialize(device_bytes);
    auto from_host = ShardedOptimizer::create(comm, lowbit_layout(), o, device);
    from_host->deserialize(host_bytes);
    for (int s = steps; s < steps + 2; ++s) {
        const std::vector<float> g = gradient(init.size(), s);
        step_with(*trained, g, true);
        step_with(*from_device, g, true);
        step_with(*from_host, g, true);
        step_with(*reference, g, false);
    }
    const std::vector<float> want = parameters(*reference);
    const struct {
        const char *name;
        ShardedOptimizer &opt;
    } resumed[] = {{"the trained optimizer", *trained},
                   {"a cuda optimizer restored from its own bytes", *from_device},
                   {"a cuda optimizer restored from host memory's bytes", *from_host}};
    for (const auto &r : resumed) {
        const std::string diff = first_difference(parameters(r.opt), want, exact);
        if (diff != "none") failures.push_back(std::string(r.name) + ", 2 steps later: " + diff);
    }
    return failures;
}

} // namespace

int main(int argc, char **argv) {
    Args args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--backend" && i + 1 < argc)
            args.backend = argv[++i];
        else if (a == "--steps" && i + 1 < argc)
            args.steps = std::atoi(argv[++i]);
        else if (a == "--exact")
            args.exact = true;
        else if (a == "--verbose")
            args.verbose = true;
        else
            args.backend.clear(), i = argc;
    }
    if ((args.backend != "staged" && args.backend != "nccl") || args.steps < 1) {
        std::fprintf(stderr, "usage: %s --backend staged|nccl [--exact] [--steps N] [--verbose]\n", argv[0]);
        return 2;
    }
    BootstrapConfig config;
    try {
        config = BootstrapConfig::from_env();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAIL bad launcher environment: %s\n", e.what());
        return 1;
    }
    if (const int skip = gpu_skip_reason(args.backend, "low-bit engine", config.world_size)) return skip;
    CommunicatorPtr comm;
    try {
        comm = args.backend == "nccl" ? gpu::create_nccl_communicator(config) : gpu::create_staged_communicator(config);
        cuda_ok(cudaSetDevice(gpu::device_of(*comm)), "cudaSetDevice");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAIL cannot create the %s communicator (rank %d of %d): %s\n", args.backend.c_str(),
                     config.rank, config.world_size, e.what());
        return 1;
    }
    int failed = 0, cases = 0;
    for (StatePrecision precision : {StatePrecision::bits8, StatePrecision::bits4})
        for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::sgd})
            for (int variant = 0; variant < 5; ++variant) {
                // ddp, zero1, zero2, fsdp; then zero2 with ZeRO-Offload (the CPU rule on host copies)
                const Strategy strategies[] = {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp,
                                               Strategy::zero2};
                const Strategy strategy = strategies[variant];
                const bool offload = variant == 4;
                const std::string name = std::string(state_precision_name(precision)) + " " +
                                         optimizer_kind_name(kind) + " " + strategy_name(strategy) +
                                         (offload ? "+offload" : "") + " ranks=" + std::to_string(comm->size());
                std::vector<std::string> failures;
                try {
                    failures = run_case(comm, precision, kind, strategy, offload, args.steps, args.exact);
                    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the case");
                } catch (const std::exception &e) {
                    std::printf("FAIL %s rank=%d: %s\n", name.c_str(), comm->rank(), e.what());
                    std::fflush(stdout);
                    comm->abort("lowbit_engine_main: rank " + std::to_string(comm->rank()) + " failed: " + e.what());
                    return 1;
                }
                ++cases;
                for (const std::string &f : failures) std::printf("FAIL %s rank=%d: %s\n", name.c_str(), comm->rank(), f.c_str());
                if (!failures.empty()) ++failed;
                else if (args.verbose || comm->rank() == 0) std::printf("PASS %s\n", name.c_str());
                std::fflush(stdout);
            }
    try {
        comm->barrier();
    } catch (const std::exception &e) {
        std::printf("FAIL final barrier (rank %d): %s\n", comm->rank(), e.what());
        return 1;
    }
    if (failed) {
        std::printf("FAIL %d of %d cases failed on rank %d\n", failed, cases, comm->rank());
        return 1;
    }
    return 0;
}
