#include "step_time.hpp"

#include <algorithm>
#include <deque>
#include <map>

#include "sharding/compression/chunk_codec.hpp"
#include "sharding/compression/power_sgd_reducer.hpp"

namespace shardopt::planner {
namespace {

// The shard group's communicator: one collective at a time, in the order issued.
struct Queue {
    double free_at = 0.0;
    Cost total;
    double issue(double at, const Cost &cost) {
        free_at = std::max(at, free_at) + cost.seconds;
        total += cost;
        return free_at;
    }
};

// What reducing bucket b costs: the collective of the plan, or the compressed reducer's exchange.
Cost reduction_cost(const StepModel &m, int b) {
    const Cluster &c = *m.cluster;
    const BucketLayout &bl = m.layout->bucket(b);
    const double elem = double(m.layout->element_size()), bytes = double(bl.padded) * elem;
    const bool scatter = m.plan.grads_sharded();
    const CompressionOptions &z = m.options.compression;
    if (!z.enabled())
        return collective_cost(c, scatter ? Collective::reduce_scatter : Collective::allreduce, bytes, m.shard);
    if (z.method == GradientCompression::power_sgd) { // the dense part and each matrix's P, then the Qs
        double pack = 0.0, q = 0.0;
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const TensorLayout &tl = m.layout->tensor(t);
            if (!compression::power_sgd_compresses(tl, z)) {
                pack += double(tl.count);
                continue;
            }
            pack += double(tl.rows) * z.power_sgd_rank;
            q += double(tl.count / tl.rows) * z.power_sgd_rank;
        }
        Cost cost = collective_cost(c, Collective::allreduce, pack * elem, m.shard);
        cost += collective_cost(c, Collective::allreduce, q * elem, m.shard);
        return cost;
    }
    // The chunk methods: every rank's compressed chunks to their owners, then (allreduce) the
    // reduced chunks compressed again and allgathered.
    const compression::ChunkCodec codec(z, m.layout->dtype());
    const double p = m.shard.ranks(), payload = double(codec.payload_bytes(bl.shard));
    Cost cost;
    if (m.shard.hosts > 1 && m.shard.per_host > 1 && m.shard.hierarchical) { // a host's sum first, then across
        cost = collective_cost(c, Collective::reduce_scatter, bytes, Group{1, m.shard.per_host});
        Cluster shared = c; // the L local ranks' payloads cross the host's link at once
        shared.inter.bandwidth /= m.shard.per_host;
        cost += collective_cost(shared, Collective::alltoall, payload * (m.shard.hosts - 1), Group{m.shard.hosts, 1});
    } else {
        cost = collective_cost(c, Collective::alltoall, payload * (p - 1), m.shard);
    }
    if (!scatter) cost += collective_cost(c, Collective::allgather, payload * p, m.shard);
    return cost;
}

// The pipeline schedule, action by action on every stage: a forward needs the previous chunk's
// forward of its micro-batch (and the activations' transfer), a backward the next chunk's backward
// (and the gradients' transfer). Returns the span of the slowest stage.
double pipeline_span(const StepModel &m) {
    const PipelineShape &s = m.pipeline;
    const int p = s.stages, v = s.virtual_stages, chunks = s.chunks();
    const double tf = m.forward / (double(s.micro_batches) * v), tb = m.backward / (double(s.micro_batches) * v);
    const double hop = m.activation_bytes > 0 ? m.stage_link.latency + m.activation_bytes / m.stage_link.bandwidth : 0.0;
    std::vector<std::vector<PipelineAction>> actions(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) actions[std::size_t(r)] = pipeline_actions(s, r);
    std::map<std::tuple<int, int, int>, double> done; // (kind, micro-batch, model chunk) -> end
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    std::vector<double> clock(static_cast<std::size_t>(p), 0.0);
    bool progress = true;
    while (progress) {
        progress = false;
        for (int r = 0; r < p; ++r) {
            auto &list = actions[std::size_t(r)];
            while (next[std::size_t(r)] < list.size()) {
                const PipelineAction &a = list[next[std::size_t(r)]];
                const int chunk = a.chunk * p + r; // the model chunk
                double ready = clock[std::size_t(r)];
                if (a.kind == PipelineAction::forward && chunk > 0) {
                    auto it = done.find({0, a.micro_batch, chunk - 1});
                    if (it == done.end()) break;
                    ready = std::max(ready, it->second + hop);
                }
                if (a.kind == PipelineAction::backward && chunk + 1 < chunks) {
                    auto it = done.find({1, a.micro_batch, chunk + 1});
                    if (it == done.end()) break;
                    ready = std::max(ready, it->second + hop);
                }
                const double end = ready + (a.kind == PipelineAction::forward ? tf : tb);
                done[{int(a.kind), a.micro_batch, chunk}] = end;
                clock[std::size_t(r)] = end;
                ++next[std::size_t(r)];
                progress = true;
            }
        }
    }
    return *std::max_element(clock.begin(), clock.end());
}

} // namespace

StepTime simulate_step(const StepModel &m) {
    const Cluster &c = *m.cluster;
    const ParameterSet &layout = *m.layout;
    const int nb = layout.bucket_count();
    const double elem = double(layout.element_size()), padded = double(layout.padded_count());
    std::vector<double> share(static_cast<std::size_t>(nb)), unit_bytes(static_cast<std::size_t>(nb));
    for (int b = 0; b < nb; ++b) {
        share[std::size_t(b)] = double(layout.bucket(b).padded) / padded;
        unit_bytes[std::size_t(b)] = double(layout.bucket(b).padded) * elem;
    }
    const ShardingOptions &o = m.options;
    const bool fsdp = m.plan.params_sharded(), staged = m.plan.grads_sharded() || m.offload;
    const int micro = std::max(1, o.gradient_accumulation_steps);
    const bool pipelined = m.pipeline.stages > 1;
    StepTime out;
    TimeBreakdown &t = out.time;
    t.compute = m.forward + m.backward;
    Queue queue;
    double clock = 0.0, reductions_done = 0.0, backward_end = 0.0;

    if (pipelined) {
        // The schedule runs every micro-batch; the one update follows, its buckets reduced one after
        // another (the runner hands them over in backward order once the schedule is done).
        const double span = pipeline_span(m);
        t.bubble = std::max(0.0, span - t.compute);
        clock = backward_end = span;
        for (int b = nb - 1; b >= 0; --b) reductions_done = queue.issue(clock, reduction_cost(m, b));
    } else {
        const double F = m.forward / micro, B = m.backward / micro;
        for (int step = 0; step < micro; ++step) {
            const bool last = step + 1 == micro;
            // Forward: FSDP gathers unit b (and prefetches b + 1) before computing it.
            std::vector<double> gathered(static_cast<std::size_t>(nb), -1.0);
            auto gather = [&](int b, double at) {
                if (b < 0 || b >= nb || gathered[std::size_t(b)] >= 0) return;
                gathered[std::size_t(b)] =
                    queue.issue(at, collective_cost(c, Collective::allgather, unit_bytes[std::size_t(b)], m.shard));
            };
            for (int b = 0; b < nb; ++b) {
                if (fsdp) {
                    gather(b, clock);
                    if (o.fsdp_prefetch) gather(b + 1, clock);
                    clock = std::max(clock, gathered[std::size_t(b)]);
                }
                clock += F * share[std::size_t(b)];
            }
            // Backward, buckets in reverse: FSDP gathers again (prefetching from the second unit on);
            // a staged bucket needs a free staging buffer; a ready bucket's reduction is issued.
            std::fill(gathered.begin(), gathered.end(), -1.0);
            std::deque<double> staging; // reductions holding a staging buffer, in issue order
            const std::size_t buffers = std::size_t(std::max(1, o.staging_buffers));
            for (int b = nb - 1; b >= 0; --b) {
                if (fsdp) {
                    gather(b, clock);
                    if (o.fsdp_prefetch && b < nb - 1) gather(b - 1, clock);
                    clock = std::max(clock, gathered[std::size_t(b)]);
                }
                if (staged && last && staging.size() >= buffers) { // the oldest reduction frees its buffer
                    clock = std::max(clock, staging.front());
                    staging.pop_front();
                }
                clock += B * share[std::size_t(b)];
                if (last && m.plan.reduce_grads()) {
                    const double end = queue.issue(clock, reduction_cost(m, b));
                    if (staged) staging.push_back(end);
                    reductions_done = end;
                }
            }
            backward_end = clock;
        }
    }
    const Cost reduce_total = queue.total;
    // step(): the reductions still in flight, HSDP's average across replicas, the global norm.
    clock = std::max(clock, reductions_done);
    if (m.replica.ranks() > 1 && m.plan.reduce_grads()) {
        const Cost r = collective_cost(c, Collective::allreduce, double(layout.shard_count()) * elem, m.replica);
        clock += r.seconds;
        out.sent += r;
    }
    const Cost norm = collective_cost(c, Collective::allreduce, 8.0, m.world);
    clock += norm.seconds;
    // What the passes waited for (FSDP's gathers, a staging buffer) and what the step waited for.
    t.exposed_comm = pipelined ? clock - backward_end : std::max(0.0, clock - t.compute);
    t.reduce_comm = reduce_total.seconds;

    // The update, bucket by bucket; ZeRO's allgather of bucket b starts once b is updated.
    const double traffic = double(m.owned) * elem * (3.0 + 2.0 * m.state_slots); // p, g, state read; p, state written
    double rate = c.update_bandwidth;
    if (c.memory == MemorySpace::cuda && !m.offload) rate = c.gpu_update_bandwidth;
    else if (c.host_update_bandwidth > 0) rate = std::min(rate, c.host_update_bandwidth / std::max(1, c.ranks_per_host));
    t.update = traffic / rate;
    if (m.offload && c.pcie.bandwidth > 0) // reduced gradients to the host, updated parameters back
        t.update += 2.0 * double(m.owned) * elem / c.pcie.bandwidth + c.pcie.latency * 2 * nb;
    const double update_start = clock;
    if (m.plan.gather_after_step()) {
        Queue gathers;
        gathers.free_at = update_start;
        std::vector<double> done(static_cast<std::size_t>(nb));
        double at = update_start;
        for (int b = 0; b < nb; ++b) {
            at += t.update * share[std::size_t(b)];
            done[std::size_t(b)] = gathers.issue(at, collective_cost(c, Collective::allgather, unit_bytes[std::size_t(b)], m.shard));
        }
        const double update_end = update_start + t.update;
        if (!o.overlap_param_gather) {
            t.post_update = std::max(0.0, gathers.free_at - update_end);
        } else { // the next forward waits for each bucket's gather instead
            double f = update_end;
            for (int b = 0; b < nb; ++b) f = std::max(f, done[std::size_t(b)]) + m.forward / micro * share[std::size_t(b)];
            t.post_update = std::max(0.0, f - update_end - m.forward / micro);
        }
        out.sent += gathers.total;
    }
    if (m.plan.after_update == AfterUpdate::average_params) { // LocalSGD: every period steps
        const Cost avg = collective_cost(c, Collective::allreduce, padded * elem, m.shard);
        t.post_update += avg.seconds / std::max(1, m.plan.average_every);
        out.sent.sent_intra += avg.sent_intra / std::max(1, m.plan.average_every);
        out.sent.sent_inter += avg.sent_inter / std::max(1, m.plan.average_every);
    }
    if (m.tensor_collectives > 0 && m.tensor.ranks() > 1) {
        const double micro_batches = pipelined ? double(m.pipeline.micro_batches) : std::max(m.micro_batches, double(micro));
        const Cost one = collective_cost(c, Collective::allreduce, m.tensor_bytes, m.tensor);
        t.tensor_comm = one.seconds * m.tensor_collectives * micro_batches;
        out.sent.sent_intra += one.sent_intra * m.tensor_collectives * micro_batches;
        out.sent.sent_inter += one.sent_inter * m.tensor_collectives * micro_batches;
    }
    out.sent += reduce_total;
    out.sent += norm;
    t.step = t.compute + t.exposed_comm + t.update + t.post_update + t.bubble + t.tensor_comm;
    return out;
}

} // namespace shardopt::planner
