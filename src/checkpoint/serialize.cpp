// serialize(): the consolidated form as a stream (consolidated.hpp): every rank's pieces, in file
// order, to the ranks that want the bytes; the in-memory form is that stream into a buffer, the
// same bytes on every rank.
#include "checkpoint_target.hpp"
#include "consolidated.hpp"

namespace shardopt::checkpoint {

void serialize(CheckpointTarget &target, ByteSink *sink) {
    ConsolidatedPlan plan = plan_consolidated(target, "serialize");
    hash_pieces(target, plan);
    stream_consolidated(target, plan, sink);
}

std::vector<unsigned char> serialize(CheckpointTarget &target) {
    ConsolidatedPlan plan = plan_consolidated(target, "serialize");
    hash_pieces(target, plan);
    std::vector<unsigned char> bytes;
    bytes.reserve(std::size_t(plan.file_bytes()));
    VectorSink sink(bytes);
    stream_consolidated(target, plan, &sink);
    return bytes;
}

} // namespace shardopt::checkpoint
