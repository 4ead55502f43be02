#include "parallel_update.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "shardopt/error.hpp"

namespace shardopt {

int resolve_update_threads(int requested) {
    require(requested >= 0, ErrorCode::invalid_argument, "update_threads must be >= 0 (0 = automatic)");
    if (requested > 0) return std::min(requested, kMaxUpdateThreads);
    if (const char *env = std::getenv("SHARDOPT_NUM_THREADS")) {
        char *end = nullptr;
        const long n = std::strtol(env, &end, 10);
        if (end != env && *end == '\0' && n > 0) return int(std::min<long>(n, kMaxUpdateThreads));
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return std::clamp(int(hw), 1, kMaxAutoUpdateThreads);
}

namespace {

// Elements [offset, offset + count) of s. With low-bit state (block > 0) a cut is at a block
// boundary of the tensor, so the piece's codes and scales start at its own first block, and only
// the first piece keeps the slice's shared first block, the last its shared last block.
template <typename T>
Segment<T> sub_segment(const Segment<T> &s, std::size_t offset, std::size_t count, const SplitRule &rule) {
    Segment<T> r = s;
    r.param = s.param + offset;
    r.grad = s.grad + offset;
    for (int k = 0; k < Segment<T>::kMaxStateSlots; ++k)
        if (s.state[k]) r.state[k] = s.state[k] + offset;
    if (s.matrix) r.matrix = s.matrix + offset;
    r.offset = s.offset + offset;
    r.count = count;
    if (rule.block > 0) {
        if (offset > 0) {
            const std::size_t codes = s.offset % rule.block + offset; // a multiple of the block
            for (int k = 0; k < Segment<T>::kMaxStateSlots; ++k)
                if (s.lowbit[k].codes) {
                    r.lowbit[k].codes = s.lowbit[k].codes + codes * std::size_t(rule.code_bits) / 8;
                    r.lowbit[k].scales = s.lowbit[k].scales + codes / rule.block;
                }
            r.shared_first = Segment<T>::npos;
        }
        if (offset + count < s.count) r.shared_last = Segment<T>::npos;
    }
    return r;
}

// The first element index >= offset in s where a piece may start: for low-bit state the next
// block boundary of the tensor; else where the parameter address is cache-line aligned. s.count
// when there is none.
template <typename T> std::size_t align_in_segment(const Segment<T> &s, std::size_t offset, const SplitRule &rule) {
    if (rule.block > 0) {
        const std::size_t misplaced = (s.offset + offset) % rule.block;
        return misplaced == 0 ? offset : std::min(s.count, offset + (rule.block - misplaced));
    }
    const auto address = reinterpret_cast<std::uintptr_t>(s.param + offset);
    const std::size_t misalign = address % kCacheLineBytes;
    if (misalign == 0) return offset;
    const std::size_t gap = kCacheLineBytes - misalign;
    if (gap % sizeof(T) != 0) return offset; // param not even element-aligned: cut anywhere
    return std::min(s.count, offset + gap / sizeof(T));
}

} // namespace

template <typename T>
std::vector<std::vector<Segment<T>>> split_segments(const std::vector<Segment<T>> &segments, int parts,
                                                   const SplitRule &rule) {
    std::size_t total = 0;
    for (const auto &s : segments) total += s.count;
    parts = std::max(parts, 1);
    // cuts[j]: global element index where piece j starts; cuts[parts] = total.
    std::vector<std::size_t> cuts(static_cast<std::size_t>(parts) + 1, total);
    cuts[0] = 0;
    std::size_t seg = 0, seg_start = 0;
    for (int j = 1; j < parts; ++j) {
        const std::size_t target = std::max(cuts[std::size_t(j) - 1], total / std::size_t(parts) * std::size_t(j) +
                                                                          std::min<std::size_t>(j, total % parts));
        while (seg < segments.size() && seg_start + segments[seg].count <= target) seg_start += segments[seg++].count;
        if (seg == segments.size()) break; // target == total
        cuts[std::size_t(j)] = seg_start + align_in_segment(segments[seg], target - seg_start, rule);
    }
    std::vector<std::vector<Segment<T>>> pieces(static_cast<std::size_t>(parts));
    std::size_t start = 0;
    for (const auto &s : segments) {
        const std::size_t end = start + s.count;
        for (std::size_t j = 0; j < std::size_t(parts); ++j) {
            const std::size_t lo = std::max(start, cuts[j]), hi = std::min(end, cuts[j + 1]);
            if (lo < hi) pieces[j].push_back(sub_segment(s, lo - start, hi - lo, rule));
        }
        start = end;
    }
    pieces.erase(std::remove_if(pieces.begin(), pieces.end(), [](const auto &piece) { return piece.empty(); }),
                 pieces.end());
    return pieces;
}

ParallelUpdate::ParallelUpdate(int threads) : threads_(resolve_update_threads(threads)) {}
ParallelUpdate::~ParallelUpdate() = default;

ThreadPool &ParallelUpdate::pool() {
    if (!pool_) pool_ = std::make_unique<ThreadPool>(threads_);
    return *pool_;
}

SplitRule SplitRule::of(const Optimizer &opt) {
    SplitRule rule;
    rule.block = opt.lowbit_block();
    rule.code_bits = opt.options().state_precision == StatePrecision::bits4 ? 4 : 8;
    return rule;
}

template <typename T>
void ParallelUpdate::begin_step(const Optimizer &opt, const std::vector<Segment<T>> &segments, int64_t step,
                                double *stats) const {
    for (const auto &s : segments) opt.begin_step(s, step, stats);
}

template <typename T>
void ParallelUpdate::continue_step(int phase, const Optimizer &opt, const std::vector<Segment<T>> &segments,
                                   int64_t step, double *stats) const {
    for (const auto &s : segments) opt.continue_step(phase, s, step, stats);
}

template <typename T>
void ParallelUpdate::apply(const Optimizer &opt, const std::vector<Segment<T>> &segments, int64_t step,
                           const double *stats) {
    std::size_t total = 0;
    for (const auto &s : segments) total += s.count;
    const int parts = total < kMinParallelElements
                          ? 1
                          : int(std::min<std::size_t>(std::size_t(threads_), total / kMinElementsPerThread));
    if (parts <= 1) {
        for (const auto &s : segments) opt.apply(s, step, stats);
        return;
    }
    const auto pieces = split_segments(segments, parts, SplitRule::of(opt));
    pool().run(int(pieces.size()), [&](int j) {
        for (const auto &s : pieces[std::size_t(j)]) opt.apply(s, step, stats);
    });
}

template std::vector<std::vector<Segment<float>>> split_segments(const std::vector<Segment<float>> &, int,
                                                                 const SplitRule &);
template std::vector<std::vector<Segment<double>>> split_segments(const std::vector<Segment<double>> &, int,
                                                                  const SplitRule &);
template void ParallelUpdate::continue_step(int, const Optimizer &, const std::vector<Segment<float>> &, int64_t,
                                            double *) const;
template void ParallelUpdate::continue_step(int, const Optimizer &, const std::vector<Segment<double>> &, int64_t,
                                            double *) const;
template void ParallelUpdate::begin_step(const Optimizer &, const std::vector<Segment<float>> &, int64_t,
                                         double *) const;
template void ParallelUpdate::begin_step(const Optimizer &, const std::vector<Segment<double>> &, int64_t,
                                         double *) const;
template void ParallelUpdate::apply(const Optimizer &, const std::vector<Segment<float>> &, int64_t, const double *);
template void ParallelUpdate::apply(const Optimizer &, const std::vector<Segment<double>> &, int64_t, const double *);

} // namespace shardopt
