// Pipeline schedules: the order in which one pipeline rank runs the forward and backward passes
// of its model chunks over the micro-batches of a batch.
//
// The model is cut into pp_size * virtual_stages chunks; rank r holds chunks r, r + pp_size,
// r + 2 pp_size, ... (Megatron-Core's interleaving), its local chunk c being model chunk
// c * pp_size + r. Activations flow from model chunk k to k + 1, their gradients back.
//
//   gpipe             every forward, then every backward: m micro-batches held at once
//   one_f_one_b       pp_size - r - 1 warm-up forwards, then one forward / one backward
//                     alternately: at most pp_size - r micro-batches held
//   interleaved_1f1b  1F1B over virtual_stages chunks per rank, micro-batches taken in groups
//                     of pp_size (num_micro_batches must be a multiple of pp_size): a bubble
//                     virtual_stages times smaller
//
// With a forward taking tf and a backward tb per rank (tf/v and tb/v per chunk), every schedule
// here keeps each rank busy m (tf + tb) out of a span of (m + (p - 1) / v) (tf + tb): the bubble
// fraction is (p - 1) / (v m + p - 1) (v = 1 for gpipe and 1F1B).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardopt {

// Values are part of the C ABI (shardopt_pipeline_schedule; 0, the default, is 1F1B): never renumber.
enum class PipelineSchedule : std::int32_t { one_f_one_b = 0, gpipe = 1, interleaved_1f1b = 2 };
const char *pipeline_schedule_name(PipelineSchedule schedule) noexcept;

struct PipelineAction {
    enum Kind : std::int32_t { forward = 0, backward = 1 };
    Kind kind = forward;
    int micro_batch = 0;
    int chunk = 0; // local chunk (virtual stage) on this rank, 0..virtual_stages-1
    bool operator==(const PipelineAction &o) const {
        return kind == o.kind && micro_batch == o.micro_batch && chunk == o.chunk;
    }
};

// The shape of a pipeline and the schedule run over it.
struct PipelineShape {
    PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
    int stages = 1;         // pp_size
    int micro_batches = 1;  // m
    int virtual_stages = 1; // v: chunks per rank (interleaved_1f1b only; 1 otherwise)
    int chunks() const { return stages * virtual_stages; }
};

// Throws Error(invalid_argument) naming what is wrong: sizes < 1, virtual_stages != 1 outside
// interleaved_1f1b, or < 2 for it, m not a multiple of pp_size for interleaved_1f1b.
void validate_pipeline_shape(const PipelineShape &shape);

// Rank `rank`'s actions, in the order it runs them: every (micro-batch, chunk) forward and
// backward exactly once, each backward after its forward.
std::vector<PipelineAction> pipeline_actions(const PipelineShape &shape, int rank);

// The most (micro-batch, chunk) forwards rank `rank` holds before their backward, as the
// schedule's theory gives it: gpipe m; 1F1B min(p - r, m); interleaved min((p - r - 1) * 2 +
// (v - 1) * p + 1, v m) chunk activations (v m: all of them when m == p).
int pipeline_peak_activations(const PipelineShape &shape, int rank);
// (p - 1) / (v m + p - 1): the idle share of the pipeline's span when every chunk's forward
// and backward take the same time on every rank.
double pipeline_bubble_fraction(const PipelineShape &shape);

// "F0.0 F1.0 B0.0 ..." (F|B, micro-batch, local chunk): for error messages and tests.
std::string describe(const std::vector<PipelineAction> &actions);

} // namespace shardopt
