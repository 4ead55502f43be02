#include "mlp_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"

namespace shardopt::examples {
namespace {

enum OpKind { fc1_weight = 0, fc1_bias = 1, relu = 2, fc2_weight = 3, fc2_bias = 4, loss_op = 5 };
const char *const kTensorOf[kMlpOps] = {"fc1.weight", "fc1.bias", nullptr, "fc2.weight", "fc2.bias", nullptr};

// FSDP: the units params() gathered are freed after each call (a no-op for other strategies).
void release_units(ShardedOptimizer &opt) {
    for (int b = 0; b < opt.layout().bucket_count(); ++b) opt.release(b);
}

} // namespace

std::vector<int> mlp_chunk_bounds(int chunks) {
    switch (chunks) {
    case 1: return {0, 6};
    case 2: return {0, 3, 6};                   // fc1 + relu | fc2 + loss
    case 4: return {0, 1, 3, 4, 6};             // fc1.weight | fc1.bias relu | fc2.weight | fc2.bias loss
    case 8: return {0, 1, 2, 4, 5, 5, 5, 5, 6}; // one tensor per rank of 4; three identity chunks
    }
    throw Error(ErrorCode::invalid_argument, "the demo MLP splits into 1, 2, 4 or 8 chunks, not " + std::to_string(chunks));
}

MlpPipelineStage::MlpPipelineStage(const MlpShape &shape, const Dataset &data, std::vector<int> bounds, int stages,
                                   int rank)
    : shape_(shape), data_(data), bounds_(std::move(bounds)), stages_(stages), rank_(rank) {
    const int chunks = int(bounds_.size()) - 1;
    require(chunks >= 1 && chunks % stages == 0, ErrorCode::invalid_argument,
            "MlpPipelineStage: " + std::to_string(chunks) + " chunks do not spread over " + std::to_string(stages) +
                " stages");
}

std::vector<MlpPipelineStage::Op> MlpPipelineStage::ops_of(int chunk) const {
    const int k = chunk * stages_ + rank_;
    std::vector<Op> ops;
    int tensor = 0; // tensors of this rank's earlier chunks come first in its layout
    for (int c = rank_; c < k; c += stages_)
        for (int op = bounds_[std::size_t(c)]; op < bounds_[std::size_t(c) + 1]; ++op) tensor += kTensorOf[op] != nullptr;
    for (int op = bounds_[std::size_t(k)]; op < bounds_[std::size_t(k) + 1]; ++op)
        ops.push_back({op, kTensorOf[op] ? tensor++ : -1});
    return ops;
}

ParameterSet MlpPipelineStage::layout(DType dtype) const {
    ParameterSet layout(dtype);
    const auto all = mlp_tensors(shape_);
    for (int k = rank_; k < int(bounds_.size()) - 1; k += stages_) {
        bool any = false;
        for (int op = bounds_[std::size_t(k)]; op < bounds_[std::size_t(k) + 1]; ++op) {
            if (!kTensorOf[op]) continue;
            for (const auto &[name, count] : all)
                if (name == kTensorOf[op]) layout.add(name, count);
            any = true;
        }
        if (any) layout.end_bucket(); // one bucket (FSDP unit) per chunk
    }
    return layout;
}

namespace {
// Offset of each tensor in the full packed parameters.
std::size_t full_offset(const MlpShape &s, const std::string &name) {
    std::size_t offset = 0;
    for (const auto &[n, count] : mlp_tensors(s)) {
        if (n == name) return offset;
        offset += count;
    }
    throw Error(ErrorCode::internal, "no tensor " + name);
}
} // namespace

std::vector<double> MlpPipelineStage::slice(const std::vector<double> &full) const {
    const ParameterSet l = layout(DType::f64);
    std::vector<double> out;
    for (const auto &t : l.tensors()) {
        const std::size_t at = full_offset(shape_, t.name);
        out.insert(out.end(), full.begin() + long(at), full.begin() + long(at + t.count));
    }
    return out;
}

void MlpPipelineStage::unslice(const std::vector<double> &part, std::vector<double> &full) const {
    const ParameterSet l = layout(DType::f64);
    std::size_t in = 0;
    for (const auto &t : l.tensors()) {
        std::copy(part.begin() + long(in), part.begin() + long(in + t.count), full.begin() + long(full_offset(shape_, t.name)));
        in += t.count;
    }
}

void MlpPipelineStage::set_batch(std::vector<std::vector<std::int64_t>> micro_batches, std::vector<double> weights) {
    require(micro_batches.size() == weights.size(), ErrorCode::invalid_argument,
            "MlpPipelineStage::set_batch: one weight per micro-batch");
    samples_ = std::move(micro_batches);
    weights_ = std::move(weights);
}

void MlpPipelineStage::set_batch(std::int64_t first, std::int64_t count, int micro_batches, int dp_rank, int dp_size) {
    std::vector<std::vector<std::int64_t>> samples;
    std::vector<double> weights;
    for (int mb = 0; mb < micro_batches; ++mb) {
        const std::int64_t lo = first + count * mb / micro_batches, hi = first + count * (mb + 1) / micro_batches;
        const BatchSlice slice = batch_slice(lo, hi - lo, dp_rank, dp_size);
        samples.push_back(slice.indices());
        weights.push_back(slice.weight);
    }
    set_batch(std::move(samples), std::move(weights));
}

const double *MlpPipelineStage::params(const StageCall &call, int tensor) const {
    ShardedOptimizer &opt = *call.optimizer;
    const auto &tl = opt.layout().tensor(tensor);
    // gather: the resident parameters, or under FSDP the unit made whole for this call.
    const auto *bucket = static_cast<const double *>(opt.gather(tl.bucket));
    return bucket + (tl.offset - opt.layout().bucket(tl.bucket).offset);
}

int MlpPipelineStage::width_after(int op) const {
    return op <= relu ? shape_.hidden : shape_.classes;
}

std::vector<double> MlpPipelineStage::apply(const StageCall &call, const Op &op, const std::vector<double> &in,
                                            double *loss) const {
    const auto &samples = samples_.at(std::size_t(call.micro_batch));
    const std::size_t n = samples.size();
    const int I = shape_.inputs, H = shape_.hidden, C = shape_.classes;
    std::vector<double> out(op.kind == loss_op ? 0 : n * std::size_t(width_after(op.kind)));
    const double *p = op.tensor >= 0 ? params(call, op.tensor) : nullptr;
    switch (op.kind) {
    case fc1_weight:
        for (std::size_t k = 0; k < n; ++k)
            for (int j = 0; j < H; ++j) {
                double acc = 0;
                for (int i = 0; i < I; ++i) acc += p[j * I + i] * data_.x[std::size_t(samples[k]) * I + i];
                out[k * H + j] = acc;
            }
        break;
    case fc1_bias:
    case fc2_bias: {
        const int w = width_after(op.kind);
        for (std::size_t k = 0; k < n; ++k)
            for (int j = 0; j < w; ++j) out[k * w + j] = in[k * w + j] + p[j];
        break;
    }
    case relu:
        for (std::size_t e = 0; e < out.size(); ++e) out[e] = in[e] > 0 ? in[e] : 0;
        break;
    case fc2_weight:
        for (std::size_t k = 0; k < n; ++k)
            for (int c = 0; c < C; ++c) {
                double acc = 0;
                for (int j = 0; j < H; ++j) acc += p[c * H + j] * in[k * H + j];
                out[k * C + c] = acc;
            }
        break;
    case loss_op: {
        double sum = 0;
        for (std::size_t k = 0; k < n; ++k) {
            const double *z = &in[k * C];
            const double mx = *std::max_element(z, z + C);
            double denom = 0;
            for (int c = 0; c < C; ++c) denom += std::exp(z[c] - mx);
            sum += std::log(denom) - (z[data_.y[std::size_t(samples[k])]] - mx);
        }
        *loss = n ? sum / double(n) * weights_.at(std::size_t(call.micro_batch)) : 0.0;
        break;
    }
    }
    return out;
}

double MlpPipelineStage::forward(const StageCall &call, const Activation &input, Activation &output) {
    std::vector<double> act(input.as<double>(), input.as<double>() + input.count());
    double loss = 0;
    for (const Op &op : ops_of(call.chunk)) act = apply(call, op, act, &loss);
    release_units(*call.optimizer);
    if (call.last) return loss;
    std::copy(act.begin(), act.end(), static_cast<double *>(output.resize(act.size())));
    return 0.0;
}

void MlpPipelineStage::backward(const StageCall &call, const Activation &input, const Activation &output_grad,
                                Activation &input_grad) {
    const auto &samples = samples_.at(std::size_t(call.micro_batch));
    const std::size_t n = samples.size();
    const int I = shape_.inputs, H = shape_.hidden, C = shape_.classes;
    const auto ops = ops_of(call.chunk);
    // Recompute the chunk's forward: acts[i] is op i's input.
    std::vector<std::vector<double>> acts{std::vector<double>(input.as<double>(), input.as<double>() + input.count())};
    double loss = 0;
    for (const Op &op : ops) acts.push_back(apply(call, op, acts.back(), &loss));
    std::vector<double> g(output_grad.as<double>(), output_grad.as<double>() + output_grad.count());
    for (int i = int(ops.size()) - 1; i >= 0; --i) {
        const Op &op = ops[std::size_t(i)];
        const std::vector<double> &in = acts[std::size_t(i)];
        auto *gp = op.tensor >= 0 ? static_cast<double *>(call.grad(op.tensor)) : nullptr;
        std::vector<double> gin;
        switch (op.kind) {
        case fc1_weight:
            for (std::size_t k = 0; k < n; ++k)
                for (int j = 0; j < H; ++j)
                    for (int x = 0; x < I; ++x) gp[j * I + x] += g[k * H + j] * data_.x[std::size_t(samples[k]) * I + x];
            break; // the model's input has no gradient
        case fc1_bias:
        case fc2_bias: {
            const int w = width_after(op.kind);
            for (std::size_t k = 0; k < n; ++k)
                for (int j = 0; j < w; ++j) gp[j] += g[k * w + j];
            gin = g;
            break;
        }
        case relu:
            gin.resize(g.size());
            for (std::size_t e = 0; e < g.size(); ++e) gin[e] = in[e] > 0 ? g[e] : 0;
            break;
        case fc2_weight: {
            const double *w2 = params(call, op.tensor);
            gin.assign(n * std::size_t(H), 0.0);
            for (std::size_t k = 0; k < n; ++k)
                for (int c = 0; c < C; ++c)
                    for (int j = 0; j < H; ++j) {
                        gp[c * H + j] += g[k * C + c] * in[k * H + j];
                        gin[k * H + j] += w2[c * H + j] * g[k * C + c];
                    }
            break;
        }
        case loss_op: {
            const double scale = n ? weights_.at(std::size_t(call.micro_batch)) / double(n) : 0.0;
            gin.resize(n * std::size_t(C));
            for (std::size_t k = 0; k < n; ++k) {
                const double *z = &in[k * C];
                const double mx = *std::max_element(z, z + C);
                double denom = 0;
                for (int c = 0; c < C; ++c) denom += std::exp(z[c] - mx);
                const int label = data_.y[std::size_t(samples[k])];
                for (int c = 0; c < C; ++c) gin[k * C + c] = (std::exp(z[c] - mx) / denom - (c == label ? 1.0 : 0.0)) * scale;
            }
            break;
        }
        }
        g = std::move(gin);
    }
    release_units(*call.optimizer);
    if (!call.first) std::copy(g.begin(), g.end(), static_cast<double *>(input_grad.resize(g.size())));
}

} // namespace shardopt::examples
