// Checkpoints at scale (bench/checkpoint.sh, ./dev bench checkpoint): an f32 Adam model of
// --params parameters in --units tensors (one bucket each) under --strategy on the job's ranks,
// one step taken, then each phase of --phases with its peak RSS (VmHWM, reset before the phase
// through /proc/self/clear_refs) and its time on every rank:
//   save_sharded, save_consolidated   opt.save(DIR/sharded | DIR/consolidated, form)
//   load_sharded, load_consolidated   opt.load(the same)
//   serialize                         opt.serialize(writer) to rank 0, which only hashes it
// or, with --resume CKPT: load CKPT, one more step, and print the digest of the result (XXH3 of
// the serialized data, the header with its random generation left out), so two checkpoints that
// resume bit for bit print the same digest.
// Each result is one line: name=checkpoint key=value ...
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <xxhash.h>

#include "shardopt/error.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
    double params = 150e6;
    int units = 40;
    Strategy strategy = Strategy::fsdp;
    std::string dir = "/tmp/shardopt-bench-checkpoint";
    std::string phases = "save_sharded,save_consolidated,load_sharded,load_consolidated";
    std::string resume;
};

// VmHWM / VmRSS of this process, bytes.
std::size_t status_bytes(const char *field) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind(field, 0) == 0) {
            std::istringstream v(line.substr(std::strlen(field)));
            std::size_t kib = 0;
            v >> kib;
            return kib * 1024;
        }
    return 0;
}

// Resets VmHWM to the current RSS (Linux: "5" into clear_refs).
bool reset_peak() {
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    out.flush();
    return bool(out);
}

void fill_and_step(ShardedOptimizer &opt, const Args &a, float value) {
    const bool fsdp = a.strategy == Strategy::fsdp;
    const int units = opt.layout().bucket_count();
    opt.zero_grad();
    for (int u = units - 1; u >= 0; --u) { // backward, last unit first
        if (fsdp) opt.gather(u);
        auto *g = static_cast<float *>(opt.bucket_grad(u));
        std::fill(g, g + opt.layout().bucket(u).count, value);
        opt.grad_ready(u);
        if (fsdp) opt.release(u);
    }
    opt.step();
}

double max_over(Communicator &comm, double v) {
    comm.allreduce(&v, &v, 1, DType::f64, ReduceOp::max);
    return v;
}

// XXH3 of the serialized checkpoint's data (everything after the header), on rank 0.
std::uint64_t digest(ShardedOptimizer &opt, Communicator &comm) {
    XXH3_state_t *state = XXH3_createState();
    XXH3_64bits_reset(state);
    std::uint64_t skip = ~std::uint64_t(0); // where the data starts, once the preamble is seen
    unsigned char preamble[32];
    ShardedOptimizer::ByteWriter write;
    std::uint64_t offset = 0;
    if (comm.rank() == 0)
        write = [&](const void *data, std::size_t n) {
            const auto *p = static_cast<const unsigned char *>(data);
            for (std::size_t i = 0; i < n && offset + i < 32; ++i) preamble[offset + i] = p[i];
            if (offset + n >= 32 && skip == ~std::uint64_t(0)) {
                std::uint64_t header = 0;
                std::memcpy(&header, preamble + 16, 8);
                skip = 32 + header;
            }
            if (skip != ~std::uint64_t(0) && offset + n > skip) {
                const std::uint64_t from = std::max(offset, skip) - offset;
                XXH3_64bits_update(state, p + from, std::size_t(n - from));
            }
            offset += n;
        };
    opt.serialize(write);
    const std::uint64_t d = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return d;
}

ParameterSet make_layout(const Args &a) {
    const std::size_t per_unit = std::size_t(a.params / a.units);
    ParameterSet layout(DType::f32);
    for (int u = 0; u < a.units; ++u) {
        layout.add("unit" + std::to_string(u), per_unit);
        layout.end_bucket();
    }
    return layout;
}

void run(Communicator &comm, const Args &a) {
    ParameterSet layout = make_layout(a);
    const std::size_t total = std::size_t(a.params / a.units) * std::size_t(a.units);
    ShardingOptions o;
    o.strategy = a.strategy;
    const auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
    const char *strategy = strategy_name(a.strategy);
    auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, o);
    if (!a.resume.empty()) { // load, one more step, the digest
        const auto start = Clock::now();
        opt->load(a.resume);
        const double load_s = max_over(comm, std::chrono::duration<double>(Clock::now() - start).count());
        fill_and_step(*opt, a, 2e-4f);
        const std::uint64_t d = digest(*opt, comm);
        if (comm.rank() == 0)
            std::printf("name=checkpoint mode=resume strategy=%s ranks=%d params=%zu checkpoint=%s step=%lld load_s=%.2f "
                        "digest=%016llx\n",
                        strategy, comm.size(), total, a.resume.c_str(), static_cast<long long>(opt->step_count()), load_s,
                        static_cast<unsigned long long>(d));
        return;
    }
    fill_and_step(*opt, a, 1e-4f);
    const std::size_t base_rss = status_bytes("VmRSS:");
    std::stringstream phases(a.phases);
    double sharded_save_rss = 0, sharded_save_s = 0;
    for (std::string phase; std::getline(phases, phase, ',');) {
        const std::string sharded = a.dir + "/sharded", consolidated = a.dir + "/consolidated";
        comm.barrier();
        const bool reset = reset_peak();
        const std::size_t before = status_bytes("VmRSS:");
        const auto start = Clock::now();
        std::uint64_t d = 0;
        if (phase == "save_sharded") opt->save(sharded, CheckpointForm::sharded);
        else if (phase == "save_consolidated") opt->save(consolidated, CheckpointForm::consolidated);
        else if (phase == "load_sharded") opt->load(sharded);
        else if (phase == "load_consolidated") opt->load(consolidated);
        else if (phase == "serialize") d = digest(*opt, comm);
        else throw Error(ErrorCode::invalid_argument, "unknown phase " + phase);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        const double peak = double(reset ? status_bytes("VmHWM:") : 0);
        const double worst_peak = max_over(comm, peak), worst_s = max_over(comm, seconds);
        std::printf("name=checkpoint strategy=%s ranks=%d params=%zu phase=%s rank=%d rss_before_GB=%.3f peak_rss_GB=%.3f "
                    "seconds=%.2f\n",
                    strategy, comm.size(), total, phase.c_str(), comm.rank(), double(before) / 1e9, peak / 1e9, seconds);
        std::fflush(stdout);
        comm.barrier();
        if (comm.rank() != 0) continue;
        std::printf("name=checkpoint strategy=%s ranks=%d params=%zu phase=%s max_peak_rss_GB=%.3f max_seconds=%.2f%s",
                    strategy, comm.size(), total, phase.c_str(), worst_peak / 1e9, worst_s, reset ? "" : " (no clear_refs)");
        if (phase == "save_sharded") {
            sharded_save_rss = worst_peak;
            sharded_save_s = worst_s;
        }
        if (phase == "serialize") std::printf(" digest=%016llx", static_cast<unsigned long long>(d));
        if (phase == "save_consolidated" && sharded_save_s > 0) {
            const double extra = (worst_peak - sharded_save_rss) / double(1 << 20);
            std::printf(" vs_sharded_rss_MiB=%+.0f (bound +256: %s) vs_sharded_time=%.2fx (bound 1.5x: %s)", extra,
                        extra <= 256 ? "met" : "not met", worst_s / sharded_save_s,
                        worst_s <= 1.5 * sharded_save_s ? "met" : "not met");
        }
        std::printf(" base_rss_GB=%.3f\n", double(base_rss) / 1e9);
        std::fflush(stdout);
    }
}

} // namespace

int main(int argc, char **argv) {
    Args a;
    static const option opts[] = {{"params", required_argument, nullptr, 'p'},
                                   {"units", required_argument, nullptr, 'u'},
                                   {"strategy", required_argument, nullptr, 's'},
                                   {"dir", required_argument, nullptr, 'd'},
                                   {"phases", required_argument, nullptr, 'P'},
                                   {"resume", required_argument, nullptr, 'r'},
                                   {nullptr, 0, nullptr, 0}};
    try {
        for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
            switch (c) {
            case 'p': a.params = std::stod(optarg); break;
            case 'u': a.units = std::stoi(optarg); break;
            case 's':
                if (std::string(optarg) == "fsdp") a.strategy = Strategy::fsdp;
                else if (std::string(optarg) == "zero2") a.strategy = Strategy::zero2;
                else throw Error(ErrorCode::invalid_argument, std::string("strategy ") + optarg + ": fsdp or zero2");
                break;
            case 'd': a.dir = optarg; break;
            case 'P': a.phases = optarg; break;
            case 'r': a.resume = optarg; break;
            default: std::fprintf(stderr, "bench_checkpoint: bad option\n"); return 2;
            }
        }
        auto comm = create_communicator_from_env();
        run(*comm, a);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
        return 1;
    }
}
