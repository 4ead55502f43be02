// The three pipeline schedules as per-rank action lists (see pipeline_schedule.hpp).
#include "shardopt/pipeline_schedule.hpp"

#include <algorithm>

#include "shardopt/error.hpp"

namespace shardopt {
namespace {

using Kind = PipelineAction::Kind;

std::vector<PipelineAction> gpipe(const PipelineShape &s) {
    std::vector<PipelineAction> a;
    for (int mb = 0; mb < s.micro_batches; ++mb) a.push_back({Kind::forward, mb, 0});
    for (int mb = 0; mb < s.micro_batches; ++mb) a.push_back({Kind::backward, mb, 0});
    return a;
}

// The k-th forward (or backward) of interleaved 1F1B: micro-batches in groups of p, each group
// through chunk 0, 1, ... (backward: the last chunk first), as Megatron-Core orders them.
PipelineAction interleaved_nth(const PipelineShape &s, int k, Kind kind) {
    const int p = s.stages, v = s.virtual_stages;
    const int in_group = k % (p * v);
    int chunk = in_group / p;
    if (kind == Kind::backward) chunk = v - 1 - chunk;
    return {kind, (k / (p * v)) * p + k % p, chunk};
}

int warmup_forwards(const PipelineShape &s, int rank) {
    const int p = s.stages, m = s.micro_batches, v = s.virtual_stages;
    if (s.schedule == PipelineSchedule::gpipe) return m;
    if (s.schedule == PipelineSchedule::one_f_one_b) return std::min(p - rank - 1, m);
    if (m == p) return m * v; // one group: every forward first (as Megatron-Core does)
    return std::min((p - rank - 1) * 2 + (v - 1) * p, m * v);
}

// Warm-up forwards, then alternately one forward and one backward, then the remaining backwards.
std::vector<PipelineAction> one_f_one_b(const PipelineShape &s, int rank) {
    const int total = s.micro_batches * s.virtual_stages;
    const int warmup = warmup_forwards(s, rank);
    auto nth = [&](int k, Kind kind) {
        return s.schedule == PipelineSchedule::interleaved_1f1b ? interleaved_nth(s, k, kind) : PipelineAction{kind, k, 0};
    };
    std::vector<PipelineAction> a;
    for (int k = 0; k < warmup; ++k) a.push_back(nth(k, Kind::forward));
    for (int k = 0; k < total - warmup; ++k) {
        a.push_back(nth(warmup + k, Kind::forward));
        a.push_back(nth(k, Kind::backward));
    }
    for (int k = total - warmup; k < total; ++k) a.push_back(nth(k, Kind::backward));
    return a;
}

} // namespace

const char *pipeline_schedule_name(PipelineSchedule schedule) noexcept {
    switch (schedule) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved_1f1b: return "interleaved_1f1b";
    }
    return "unknown";
}

void validate_pipeline_shape(const PipelineShape &s) {
    const std::string name = pipeline_schedule_name(s.schedule);
    require(name != "unknown", ErrorCode::invalid_argument,
            "unknown pipeline schedule " + std::to_string(int(s.schedule)));
    require(s.stages >= 1, ErrorCode::invalid_argument, "pipeline stages must be >= 1, not " + std::to_string(s.stages));
    require(s.micro_batches >= 1, ErrorCode::invalid_argument,
            "num_micro_batches must be >= 1, not " + std::to_string(s.micro_batches));
    if (s.schedule != PipelineSchedule::interleaved_1f1b) {
        require(s.virtual_stages == 1, ErrorCode::invalid_argument,
                "virtual_stages " + std::to_string(s.virtual_stages) + " needs the interleaved_1f1b schedule (" + name +
                    " runs one chunk per rank)");
        return;
    }
    require(s.virtual_stages >= 2, ErrorCode::invalid_argument,
            "interleaved_1f1b needs virtual_stages >= 2, not " + std::to_string(s.virtual_stages));
    require(s.micro_batches % s.stages == 0, ErrorCode::invalid_argument,
            "interleaved_1f1b takes micro-batches in groups of the pipeline depth: num_micro_batches " +
                std::to_string(s.micro_batches) + " is not a multiple of " + std::to_string(s.stages));
}

std::vector<PipelineAction> pipeline_actions(const PipelineShape &shape, int rank) {
    validate_pipeline_shape(shape);
    require(rank >= 0 && rank < shape.stages, ErrorCode::invalid_argument,
            "pipeline rank " + std::to_string(rank) + " out of range for " + std::to_string(shape.stages) + " stages");
    if (shape.schedule == PipelineSchedule::gpipe) return gpipe(shape);
    return one_f_one_b(shape, rank);
}

int pipeline_peak_activations(const PipelineShape &shape, int rank) {
    validate_pipeline_shape(shape);
    const int total = shape.micro_batches * shape.virtual_stages;
    // A forward beyond the warm-up runs before the first backward, so one more is held.
    return std::min(warmup_forwards(shape, rank) + 1, total);
}

double pipeline_bubble_fraction(const PipelineShape &shape) {
    validate_pipeline_shape(shape);
    const double idle = shape.stages - 1;
    return idle / (double(shape.virtual_stages) * shape.micro_batches + idle);
}

std::string describe(const std::vector<PipelineAction> &actions) {
    std::string out;
    for (const auto &a : actions) {
        if (!out.empty()) out += ' ';
        out += (a.kind == PipelineAction::forward ? 'F' : 'B') + std::to_string(a.micro_batch) + '.' +
               std::to_string(a.chunk);
    }
    return out;
}

} // namespace shardopt
