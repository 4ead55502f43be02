// shardopt's CPU Adam step behind a plain C entry, for bench/optim_torch.py: that script times
// it and torch.optim.Adam(fused=True) in one Python process, on tensors from the same allocator,
// step by step in alternation, so both see the same machine at the same moments.
//   double shardopt_bench_adam_step(float *param, const float *grad, float *m, float *v,
//                                   size_t count, int threads, long long step)
// runs one f32 Adam step (torch's defaults: lr 1e-3, betas 0.9 / 0.999, eps 1e-8) over the
// arrays with `threads` update threads and returns its wall time in seconds. The thread pools
// live for the process (one per thread count), as an optimizer's do.
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "optim/parallel_update.hpp"
#include "shardopt/optim.hpp"

using namespace shardopt;

extern "C" __attribute__((visibility("default"))) double shardopt_bench_adam_step(float *param, const float *grad,
                                                                                  float *m, float *v,
                                                                                  std::size_t count, int threads,
                                                                                  long long step) {
    static const auto adam = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adam));
    static std::map<int, std::unique_ptr<ParallelUpdate>> engines;
    auto &engine = engines[threads];
    if (!engine) engine = std::make_unique<ParallelUpdate>(threads);
    Segment<float> seg;
    seg.param = param;
    seg.grad = grad;
    seg.state[0] = m;
    seg.state[1] = v;
    seg.count = count;
    const std::vector<Segment<float>> segments{seg};
    const auto t0 = std::chrono::steady_clock::now();
    engine->apply(*adam, segments, step, nullptr);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
