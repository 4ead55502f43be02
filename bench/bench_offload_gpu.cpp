// ZeRO-Offload on a GPU (docs/offload.md): the step time of Adam with and without offload, and the
// largest model each mode fits, one rank per process (world size 1 standalone; under
// tools/shardopt-run each process is a rank of a staged job sharing the GPUs).
//
// Modes: none (everything in device memory), optimizer (cpu_offload_optimizer), optimizer+grads
// (+ cpu_offload_gradients) over ZeRO-2, and full (all three) over FSDP. A step is what training
// does around the optimizer: (FSDP: every unit gathered and released, a forward), every bucket's
// gradient filled on the device with cudaMemsetAsync (0x3c bytes: 0.0115) last bucket first with
// grad_ready after each, step(), and the stream synchronized. The model is `params` Mi f32
// parameters in tensors of 4 Mi, buckets of 25 MiB.
//
//   step time   name=offload_step mode=... strategy=... params=NMi step_ms=... ratio_vs_none=...
//               device_bytes=... host_bytes=...   (median of --steps steps after 2 warm-up steps)
//   --fit       name=offload_fit mode=... largest=NMi tried=a,b,cx,... limit="the first refusal"
//               the largest model (doubling from --fit-start Mi, then halving the gap down to
//               --fit-resolution Mi) that is created and takes 2 steps; a refusal is any
//               shardopt::Error (out of device memory, the host-memory check of the offloaded part).
//
//   bench_offload_gpu [--params 256,1024] [--steps 10] [--modes none,optimizer,optimizer+grads,none-fsdp,full]
//                     [--fit] [--fit-start 256] [--fit-max 65536] [--fit-resolution 256] [--kilo]
// (--kilo: every size in Ki parameters instead of Mi, for a smoke run on the CUDA stand-in.)
//
// Without a usable GPU it prints one line saying why and exits 0.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "parse_list.hpp"
#include "shardopt/bootstrap.hpp"
#include "shardopt/device_optimizer.hpp"
#include "shardopt/error.hpp"
#include "shardopt/gpu_comm.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using bench::parse_list;

namespace {

void cuda_or_throw(cudaError_t status, const char *what) {
    if (status != cudaSuccess) throw Error(ErrorCode::internal, std::string(what) + ": " + cudaGetErrorString(status));
}

struct Mode {
    std::string name;
    Strategy strategy;
    bool optimizer, gradients, params;
};

const std::vector<Mode> &all_modes() {
    static const std::vector<Mode> modes = {{"none", Strategy::zero2, false, false, false},
                                            {"optimizer", Strategy::zero2, true, false, false},
                                            {"optimizer+grads", Strategy::zero2, true, true, false},
                                            {"none-fsdp", Strategy::fsdp, false, false, false},
                                            {"full", Strategy::fsdp, true, true, true}};
    return modes;
}

// Sizes are in Mi parameters, or Ki with --kilo (a smoke run on the CUDA stand-in).
int g_shift = 20;
std::string size_text(long n) { return std::to_string(n) + (g_shift == 20 ? "Mi" : "Ki"); }

ParameterSet layout_of(long mi) {
    ParameterSet layout(DType::f32);
    const std::size_t total = std::size_t(mi) << g_shift, tensor = std::size_t(4) << 20;
    for (std::size_t off = 0, t = 0; off < total; off += tensor, ++t)
        layout.add("t" + std::to_string(t), std::min(tensor, total - off));
    return layout;
}

struct Measured {
    double step_ms = 0;
    MemoryStats memory;
};

// Creates the optimizer and runs 2 + steps steps; the median of the timed ones.
Measured run(const CommunicatorPtr &comm, const Mode &m, long mi, int steps, cudaStream_t stream) {
    ShardingOptions o;
    o.strategy = m.strategy;
    o.memory = MemorySpace::cuda;
    o.cuda_stream = stream;
    o.cpu_offload_optimizer = m.optimizer;
    o.cpu_offload_gradients = m.gradients;
    o.cpu_offload_params = m.params;
    auto opt = ShardedOptimizer::create(comm, layout_of(mi), OptimizerOptions::defaults(OptimizerKind::adam), o);
    const ParameterSet &layout = opt->layout();
    std::vector<double> times;
    for (int s = 0; s < 2 + steps; ++s) {
        const auto t0 = std::chrono::steady_clock::now();
        if (m.strategy == Strategy::fsdp)
            for (int b = 0; b < layout.bucket_count(); ++b) {
                opt->gather(b);
                opt->release(b);
            }
        opt->zero_grad();
        for (int b = layout.bucket_count() - 1; b >= 0; --b) {
            cuda_or_throw(cudaMemsetAsync(opt->bucket_grad(b), 0x3c, layout.bucket(b).count * sizeof(float), stream),
                          "cudaMemsetAsync of a gradient");
            opt->grad_ready(b);
        }
        opt->step();
        cuda_or_throw(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        if (s >= 2) times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    Measured out;
    out.memory = opt->memory_stats();
    if (!times.empty()) {
        std::sort(times.begin(), times.end());
        out.step_ms = times[times.size() / 2];
    }
    return out;
}

// Whether `mi` Mi parameters fit in mode m (created, and 2 steps taken); `why` gets the refusal.
bool fits(const CommunicatorPtr &comm, const Mode &m, long mi, cudaStream_t stream, std::string &why) {
    try {
        run(comm, m, mi, 0, stream);
        return true;
    } catch (const std::exception &e) {
        why = e.what();
        (void)cudaGetLastError();
        return false;
    }
}

std::string quoted(std::string s) {
    std::replace(s.begin(), s.end(), '"', '\'');
    std::replace(s.begin(), s.end(), '\n', ' ');
    return "\"" + s.substr(0, 300) + "\"";
}

} // namespace

int main(int argc, char **argv) {
    std::vector<long> sizes{256, 1024};
    std::vector<std::string> modes;
    int steps = 10;
    bool fit = false;
    long fit_start = 256, fit_max = 65536, fit_resolution = 256;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--params" && has) sizes = parse_list(argv[++i]);
        else if (a == "--steps" && has) steps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--modes" && has) {
            std::stringstream in(argv[++i]);
            for (std::string m; std::getline(in, m, ',');) modes.push_back(m);
        } else if (a == "--fit") fit = true;
        else if (a == "--kilo") g_shift = 10;
        else if (a == "--fit-start" && has) fit_start = std::max(1L, std::atol(argv[++i]));
        else if (a == "--fit-max" && has) fit_max = std::atol(argv[++i]);
        else if (a == "--fit-resolution" && has) fit_resolution = std::max(1L, std::atol(argv[++i]));
        else {
            std::fprintf(stderr, "usage: bench_offload_gpu [--params 256,1024] [--steps 10] [--modes none,optimizer,...] "
                                 "[--fit] [--fit-start 256] [--fit-max 65536] [--fit-resolution 256]\n");
            return 2;
        }
    }
    std::vector<Mode> chosen;
    for (const Mode &m : all_modes())
        if (modes.empty() || std::find(modes.begin(), modes.end(), m.name) != modes.end()) chosen.push_back(m);
    if (chosen.empty()) {
        std::fprintf(stderr, "bench_offload_gpu: no such mode (none, optimizer, optimizer+grads, none-fsdp, full)\n");
        return 2;
    }
    if (cuda::device_count() == 0 || !gpu::staged_available()) {
        std::printf("name=offload skipped=yes reason=\"%s\"\n",
                    cuda::device_count() == 0 ? "no CUDA device" : "the staged backend is not built (CUDA and UCX)");
        return 0;
    }
    try {
        const CommunicatorPtr comm = gpu::create_staged_communicator(BootstrapConfig::from_env());
        cuda_or_throw(cudaSetDevice(gpu::device_of(*comm)), "cudaSetDevice");
        cudaStream_t stream;
        cuda_or_throw(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        cudaDeviceProp prop{};
        cuda_or_throw(cudaGetDeviceProperties(&prop, gpu::device_of(*comm)), "cudaGetDeviceProperties");
        const bool print = comm->rank() == 0;
        if (print)
            std::printf("name=offload context=device value=\"%s\" memory_GiB=%.1f ranks=%d\n", prop.name,
                        double(prop.totalGlobalMem) / (1u << 30), comm->size());
        for (long mi : sizes) {
            double none_ms[2] = {0, 0}; // zero2, fsdp
            for (const Mode &m : chosen) {
                const Measured r = run(comm, m, mi, steps, stream);
                const int kind = m.strategy == Strategy::fsdp;
                if (!m.optimizer) none_ms[kind] = r.step_ms;
                if (print)
                    std::printf("name=offload_step mode=%s strategy=%s params=%s step_ms=%.2f ratio_vs_none=%s "
                                "device_bytes=%zu host_bytes=%zu\n",
                                m.name.c_str(), strategy_name(m.strategy), size_text(mi).c_str(), r.step_ms,
                                none_ms[kind] > 0 ? std::to_string(r.step_ms / none_ms[kind]).c_str() : "n/a",
                                r.memory.total(), r.memory.host_total());
                std::fflush(stdout);
            }
        }
        if (fit)
            for (const Mode &m : chosen) {
                std::string why, tried;
                long good = 0, bad = 0;
                for (long mi = fit_start; mi <= fit_max; mi *= 2) { // doubling until the first refusal
                    const bool ok = fits(comm, m, mi, stream, why);
                    tried += (tried.empty() ? "" : ",") + std::to_string(mi) + (ok ? "" : "x");
                    if (!ok) {
                        bad = mi;
                        break;
                    }
                    good = mi;
                }
                while (bad > 0 && good > 0 && bad - good > fit_resolution) { // then halving the gap
                    const long mid = good + (bad - good) / 2;
                    std::string w;
                    const bool ok = fits(comm, m, mid, stream, w);
                    tried += "," + std::to_string(mid) + (ok ? "" : "x");
                    (ok ? good : bad) = mid;
                }
                if (print)
                    std::printf("name=offload_fit mode=%s strategy=%s largest=%s tried=%s limit=%s\n", m.name.c_str(),
                                strategy_name(m.strategy), size_text(good).c_str(), tried.c_str(),
                                bad > 0 ? quoted(why).c_str() : "\"--fit-max reached\"");
                std::fflush(stdout);
            }
        comm->barrier();
        (void)cudaStreamDestroy(stream);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_offload_gpu: %s\n", e.what());
        return 1;
    }
    return 0;
}
