// The optimizer update spread over threads. The segments of one step are treated as one run of
// elements and cut into contiguous ranges, one per thread, at cache-line boundaries of the
// parameter array; each thread calls Optimizer::apply on its pieces. Element-wise rules do the
// same arithmetic on every element whatever the cut, so the result is bitwise identical to the
// single-threaded update. LAMB's begin_step (per-tensor sums) stays on the calling thread, in
// segment order, so its statistics are exactly those of the single-threaded update; its apply
// (element-wise once the statistics are known) is threaded like the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shardopt/optim.hpp"
#include "thread_pool.hpp"

namespace shardopt {

// Threads for an update: requested > 0 is taken as is (capped at kMaxUpdateThreads); 0 means
// automatic: SHARDOPT_NUM_THREADS when set to a positive integer, else the hardware
// concurrency, capped at kMaxAutoUpdateThreads.
constexpr int kMaxUpdateThreads = 256;
constexpr int kMaxAutoUpdateThreads = 16;
int resolve_update_threads(int requested);

// Updates smaller than this many elements run on the calling thread (waking threads costs
// more than the update); each thread gets at least kMinElementsPerThread.
constexpr std::size_t kMinParallelElements = std::size_t(1) << 16;
constexpr std::size_t kMinElementsPerThread = std::size_t(1) << 15;
constexpr std::size_t kCacheLineBytes = 64;

// Where a rule's segments may be cut: anywhere (block 0), or, for low-bit state, only at block
// boundaries of the tensor, whose codes are code_bits wide.
struct SplitRule {
    std::size_t block = 0;
    int code_bits = 8;
    static SplitRule of(const Optimizer &opt);
};

// Cuts segments into at most `parts` pieces of about equal element counts. Piece j holds the
// sub-segments of contiguous element range j (in segment order); cuts fall where the parameter
// pointer is cache-line aligned, or at the rule's block boundaries (or at segment ends). Empty
// pieces (small inputs, where two cuts round to the same line) are dropped.
template <typename T>
std::vector<std::vector<Segment<T>>> split_segments(const std::vector<Segment<T>> &segments, int parts,
                                                   const SplitRule &rule = {});

class ParallelUpdate {
  public:
    // threads as in ShardingOptions::update_threads (0 = automatic). Workers start on the
    // first update large enough to use them.
    explicit ParallelUpdate(int threads = 0);
    ~ParallelUpdate();

    int threads() const noexcept { return threads_; }

    // Phase 1 of rules with per-tensor statistics (LAMB) or a matrix to write (Muon), and their
    // later phases (Adafactor): single-threaded, in segment order.
    template <typename T>
    void begin_step(const Optimizer &opt, const std::vector<Segment<T>> &segments, int64_t step,
                    double *stats) const;
    template <typename T>
    void continue_step(int phase, const Optimizer &opt, const std::vector<Segment<T>> &segments, int64_t step,
                       double *stats) const;
    // The element-wise update of every segment (phase 2 for LAMB).
    template <typename T>
    void apply(const Optimizer &opt, const std::vector<Segment<T>> &segments, int64_t step, const double *stats);

    // The pool behind apply, created on first use with threads() threads (for benchmarks that
    // run their own loops on the same threads).
    ThreadPool &pool();

  private:
    int threads_;
    std::unique_ptr<ThreadPool> pool_;
};

} // namespace shardopt
