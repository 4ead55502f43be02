// PipelineRunner: executes a rank's schedule (schedule.cpp) over its stage, moving activations
// and gradients with the pipeline group's asynchronous send/recv, then steps the optimizer once.
#include "shardopt/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "../comm/finish_quietly.hpp"
#include "../optim/vector_ops.hpp"
#include "shardopt/error.hpp"

namespace shardopt {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Messages between chunk k and k + 1 for micro-batch mb: the activation's element count (first
// batch only), the activation, its gradient. Tags keep them apart whatever order the two ranks
// run their schedules in (under interleaving one pair of ranks carries both directions).
enum Message : int { count_message = 0, activation_message = 1, gradient_message = 2 };
constexpr std::int64_t kTagLimit = std::int64_t(1) << 24; // within every backend's tag range

} // namespace

void *Activation::resize(std::size_t count) {
    bytes_.resize(count * dtype_size(dtype_));
    count_ = count;
    return data();
}

void *StageCall::grad(int t) const {
    require(optimizer != nullptr && gradients != nullptr, ErrorCode::invalid_state,
            "StageCall::grad: not inside a pipeline runner's call");
    const auto &layout = optimizer->layout();
    return gradients + layout.tensor(t).offset * layout.element_size();
}

PipelineRunner::PipelineRunner(ShardedOptimizer &optimizer, PipelineStage &stage, const PipelineOptions &options)
    : optimizer_(optimizer), stage_(stage), pipe_(optimizer.pipeline_group()) {
    const auto grid = optimizer.grid_position();
    rank_ = grid.pp_rank;
    shape_.stages = grid.pp_size;
    shape_.schedule = options.schedule;
    shape_.micro_batches = options.num_micro_batches == 0 ? grid.pp_size : options.num_micro_batches;
    shape_.virtual_stages = options.virtual_stages;
    validate_pipeline_shape(shape_);
    const auto &layout = optimizer.layout();
    require(optimizer.options().memory == MemorySpace::host, ErrorCode::unsupported,
            "PipelineRunner: the optimizer must keep host memory (the stage's gradients are summed on the host)");
    require(layout.dtype() == DType::f32 || layout.dtype() == DType::f64, ErrorCode::unsupported,
            std::string("PipelineRunner: f32 or f64 parameters only, not ") + dtype_name(layout.dtype()));
    require(optimizer.options().gradient_accumulation_steps == 1, ErrorCode::invalid_argument,
            "PipelineRunner sums the micro-batches' gradients itself: the optimizer's gradient_accumulation_steps "
            "must be 1, not " + std::to_string(optimizer.options().gradient_accumulation_steps));
    require(std::int64_t(shape_.micro_batches) * shape_.chunks() * 3 < kTagLimit, ErrorCode::invalid_argument,
            "PipelineRunner: " + std::to_string(shape_.micro_batches) + " micro-batches x " +
                std::to_string(shape_.chunks()) + " chunks exceed the message tags available");
    if (pipe_ && pipe_->size() > 1) {
        // Every stage must run the same schedule, or their messages would never meet.
        const std::int64_t mine[3] = {std::int64_t(shape_.schedule), shape_.micro_batches, shape_.virtual_stages};
        std::vector<std::int64_t> all(std::size_t(3 * pipe_->size()));
        pipe_->allgather(mine, all.data(), 3, DType::i64);
        for (int r = 0; r < pipe_->size(); ++r)
            if (!std::equal(mine, mine + 3, all.begin() + 3 * r))
                throw Error(ErrorCode::mismatch,
                            "PipelineRunner: stage " + std::to_string(rank_) + " runs " +
                                pipeline_schedule_name(shape_.schedule) + " with " + std::to_string(mine[1]) +
                                " micro-batches and " + std::to_string(mine[2]) + " virtual stages, stage " +
                                std::to_string(r) + " " + pipeline_schedule_name(PipelineSchedule(all[3 * r])) +
                                " with " + std::to_string(all[3 * r + 1]) + " and " + std::to_string(all[3 * r + 2]));
    } else {
        pipe_ = nullptr;
    }
    actions_ = pipeline_actions(shape_, rank_);
    gradients_.assign(layout.padded_count() * layout.element_size(), 0);
    agreed_.assign(std::size_t(shape_.chunks()) * std::size_t(shape_.micro_batches), -1);
}

PipelineRunner::~PipelineRunner() = default;

// One batch's execution state.
class PipelineRunner::Batch {
  public:
    explicit Batch(PipelineRunner &r)
        : r_(r), s_(r.shape_), dtype_(r.optimizer_.layout().dtype()),
          held_(std::size_t(s_.virtual_stages) * std::size_t(s_.micro_batches)) {}

    PipelineBatchResult run() {
        const auto start = Clock::now();
        std::fill(r_.gradients_.begin(), r_.gradients_.end(), 0);
        double loss_sum = 0.0;
        post_next_recv(0);
        for (std::size_t i = 0; i < r_.actions_.size(); ++i) {
            const PipelineAction &a = r_.actions_[i];
            if (a.kind == PipelineAction::forward) loss_sum += forward(i, a);
            else backward(i, a);
            reap_sends(false);
        }
        const auto waited = Clock::now();
        reap_sends(true);
        result_.wait_seconds += seconds(waited, Clock::now());
        result_.span_seconds = seconds(start, Clock::now());
        const bool has_last = rank_of(s_.chunks() - 1) == r_.rank_;
        result_.step = step();
        summarize(has_last ? loss_sum / s_.micro_batches : 0.0);
        return result_;
    }

    // After a failure: waits out (and ignores) whatever is still in flight.
    void finish_quietly() noexcept {
        shardopt::finish_quietly(pending_.work);
        for (auto &s : sends_) shardopt::finish_quietly(s.work);
        sends_.clear();
    }

  private:
    struct Recv {
        std::size_t action = 0;
        std::unique_ptr<Activation> buffer;
        WorkPtr work;
    };
    struct Send {
        WorkPtr work;
        std::unique_ptr<Activation> buffer;
        std::unique_ptr<std::int64_t> count;
    };

    int model_chunk(int chunk) const { return chunk * s_.stages + r_.rank_; }
    int rank_of(int k) const { return k % s_.stages; }
    int tag(Message kind, int mb, int boundary) const { return (mb * s_.chunks() + boundary) * 3 + kind; }
    std::int64_t &agreed(int boundary, int mb) {
        return r_.agreed_[std::size_t(boundary) * std::size_t(s_.micro_batches) + std::size_t(mb)];
    }
    std::unique_ptr<Activation> &held(const PipelineAction &a) {
        return held_[std::size_t(a.chunk) * std::size_t(s_.micro_batches) + std::size_t(a.micro_batch)];
    }

    // What action a receives: the peer, the tag, the boundary whose count it carries.
    bool receives(const PipelineAction &a, int &peer, int &boundary, Message &kind) const {
        const int k = model_chunk(a.chunk);
        if (a.kind == PipelineAction::forward) {
            if (k == 0) return false;
            peer = rank_of(k - 1), boundary = k - 1, kind = activation_message;
        } else {
            if (k == s_.chunks() - 1) return false;
            peer = rank_of(k + 1), boundary = k, kind = gradient_message;
        }
        return true;
    }

    // Posts the receive of the first action from `from` on that needs one, if its size is known,
    // so it arrives while this rank computes.
    void post_next_recv(std::size_t from) {
        for (std::size_t i = from; i < r_.actions_.size(); ++i) {
            const PipelineAction &a = r_.actions_[i];
            int peer = 0, boundary = 0;
            Message kind = activation_message;
            if (!receives(a, peer, boundary, kind)) continue;
            const std::int64_t count = agreed(boundary, a.micro_batch);
            if (count < 0) return; // first batch: the count message comes first
            pending_.action = i;
            pending_.buffer = std::make_unique<Activation>(dtype_);
            pending_.buffer->resize(std::size_t(count));
            pending_.work = r_.pipe_->recv_async(pending_.buffer->data(), std::size_t(count), dtype_, peer,
                                                 tag(kind, a.micro_batch, boundary));
            return;
        }
    }

    std::unique_ptr<Activation> receive(std::size_t i, const PipelineAction &a) {
        int peer = 0, boundary = 0;
        Message kind = activation_message;
        receives(a, peer, boundary, kind);
        const auto t0 = Clock::now();
        std::unique_ptr<Activation> buffer;
        if (pending_.work && pending_.action == i) {
            WorkPtr work = std::move(pending_.work);
            work->wait();
            buffer = std::move(pending_.buffer);
        } else {
            std::int64_t &count = agreed(boundary, a.micro_batch);
            if (count < 0) {
                r_.pipe_->recv(&count, 1, DType::i64, peer, tag(count_message, a.micro_batch, boundary));
                require(count >= 0, ErrorCode::corrupt, "pipeline: negative activation size received");
            }
            buffer = std::make_unique<Activation>(dtype_);
            buffer->resize(std::size_t(count));
            r_.pipe_->recv(buffer->data(), std::size_t(count), dtype_, peer, tag(kind, a.micro_batch, boundary));
        }
        result_.wait_seconds += seconds(t0, Clock::now());
        ++result_.recvs;
        post_next_recv(i + 1);
        return buffer;
    }

    void send(std::unique_ptr<Activation> data, int peer, Message kind, int mb, int boundary) {
        Send s;
        if (kind == activation_message) {
            std::int64_t &count = agreed(boundary, mb);
            if (count < 0) { // first batch: tell the neighbour the size
                count = std::int64_t(data->count());
                s.count = std::make_unique<std::int64_t>(count);
                r_.pipe_->send_async(s.count.get(), 1, DType::i64, peer, tag(count_message, mb, boundary));
            }
            require(std::int64_t(data->count()) == count, ErrorCode::mismatch,
                    "pipeline: model chunk " + std::to_string(boundary) + " output " + std::to_string(data->count()) +
                        " elements for micro-batch " + std::to_string(mb) + ", but agreed " + std::to_string(count) +
                        " with the next stage on the first batch");
        }
        s.work = r_.pipe_->send_async(data->data(), data->count(), dtype_, peer, tag(kind, mb, boundary));
        s.buffer = std::move(data);
        sends_.push_back(std::move(s));
        ++result_.sends;
    }

    // Frees the buffers of finished sends (all of them, waiting, when `all`).
    void reap_sends(bool all) {
        while (!sends_.empty() && (all || sends_.front().work->test())) {
            WorkPtr work = std::move(sends_.front().work);
            work->wait();
            sends_.pop_front();
        }
    }

    StageCall call_for(const PipelineAction &a) {
        StageCall c;
        c.micro_batch = a.micro_batch;
        c.chunk = a.chunk;
        c.model_chunk = model_chunk(a.chunk);
        c.first = c.model_chunk == 0;
        c.last = c.model_chunk == s_.chunks() - 1;
        c.optimizer = &r_.optimizer_;
        c.gradients = r_.gradients_.data();
        return c;
    }

    double forward(std::size_t i, const PipelineAction &a) {
        const StageCall c = call_for(a);
        std::unique_ptr<Activation> input = c.first ? std::make_unique<Activation>(dtype_) : receive(i, a);
        auto output = std::make_unique<Activation>(dtype_);
        const auto t0 = Clock::now();
        const double loss = r_.stage_.forward(c, *input, *output);
        result_.busy_seconds += seconds(t0, Clock::now());
        held(a) = std::move(input);
        result_.peak_activations = std::max(result_.peak_activations, ++in_flight_);
        if (c.last) {
            require(output->count() == 0, ErrorCode::invalid_argument,
                    "pipeline: the model's last chunk returns its loss; it output " + std::to_string(output->count()) +
                        " elements");
            return loss;
        }
        send(std::move(output), rank_of(c.model_chunk + 1), activation_message, a.micro_batch, c.model_chunk);
        return 0.0;
    }

    void backward(std::size_t i, const PipelineAction &a) {
        const StageCall c = call_for(a);
        std::unique_ptr<Activation> output_grad = c.last ? std::make_unique<Activation>(dtype_) : receive(i, a);
        std::unique_ptr<Activation> input = std::move(held(a));
        auto input_grad = std::make_unique<Activation>(dtype_);
        input_grad->resize(input->count());
        const auto t0 = Clock::now();
        r_.stage_.backward(c, *input, *output_grad, *input_grad);
        result_.busy_seconds += seconds(t0, Clock::now());
        --in_flight_;
        if (c.first) return;
        require(input_grad->count() == input->count(), ErrorCode::invalid_argument,
                "pipeline: backward of model chunk " + std::to_string(c.model_chunk) + " gave an input gradient of " +
                    std::to_string(input_grad->count()) + " elements for an input of " +
                    std::to_string(input->count()));
        send(std::move(input_grad), rank_of(c.model_chunk - 1), gradient_message, a.micro_batch, c.model_chunk - 1);
    }

    // The mean gradient over the micro-batches into the optimizer's buckets, in backward
    // order so each bucket's reduction overlaps the copy of the next; then the one update.
    StepResult step() {
        ShardedOptimizer &opt = r_.optimizer_;
        const auto &layout = opt.layout();
        const std::size_t elem = layout.element_size();
        opt.zero_grad();
        for (int b = layout.bucket_count() - 1; b >= 0; --b) {
            const auto &bl = layout.bucket(b);
            auto *bucket = static_cast<unsigned char *>(opt.bucket_grad(b));
            for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
                const auto &tl = layout.tensor(t);
                unsigned char *dst = bucket + (tl.offset - bl.offset) * elem;
                std::memcpy(dst, r_.gradients_.data() + tl.offset * elem, tl.count * elem);
                if (s_.micro_batches > 1) scale(dst, tl.count, dtype_, 1.0 / s_.micro_batches);
            }
            opt.grad_ready(b);
        }
        return opt.step();
    }

    // Loss and bubble over the pipeline: one small allgather.
    void summarize(double loss) {
        if (!r_.pipe_) {
            result_.loss = loss;
            result_.bubble_fraction = result_.span_seconds > 0 ? 1.0 - result_.busy_seconds / result_.span_seconds : 0.0;
            return;
        }
        const int p = r_.pipe_->size();
        const double mine[3] = {loss, result_.busy_seconds, result_.span_seconds};
        std::vector<double> all(std::size_t(3 * p));
        r_.pipe_->allgather(mine, all.data(), 3, DType::f64);
        double busy = 0.0, span = 0.0;
        result_.loss = 0.0;
        for (int q = 0; q < p; ++q) {
            result_.loss += all[std::size_t(3 * q)]; // one stage holds the last chunk
            busy += all[std::size_t(3 * q + 1)];
            span = std::max(span, all[std::size_t(3 * q + 2)]);
        }
        result_.bubble_fraction = span > 0 ? 1.0 - busy / (p * span) : 0.0;
    }

    PipelineRunner &r_;
    const PipelineShape &s_;
    DType dtype_;
    std::vector<std::unique_ptr<Activation>> held_; // inputs kept for their backward
    int in_flight_ = 0;
    Recv pending_;
    std::deque<Send> sends_;
    PipelineBatchResult result_;
};

PipelineBatchResult PipelineRunner::run_batch() {
    Batch batch(*this);
    auto fail = [&](const char *what, ErrorCode code) {
        // Neighbours blocked on this rank's messages stop now, with the reason; then nothing in
        // flight may still use the batch's buffers.
        if (pipe_) pipe_->abort(std::string("pipeline stage ") + std::to_string(rank_) + " failed: " + what, code);
        batch.finish_quietly();
    };
    try {
        return batch.run();
    } catch (const Error &e) {
        fail(e.what(), e.code());
        throw;
    } catch (const std::exception &e) {
        fail(e.what(), ErrorCode::invalid_state);
        throw;
    }
}

} // namespace shardopt
