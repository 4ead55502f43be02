// The demo MLP as a pipeline: its computation written as a chain of six operations
//   fc1.weight (x W1^T), fc1.bias (+ b1), relu, fc2.weight (h W2^T), fc2.bias (+ b2), loss
// cut into model chunks, each chunk a contiguous run of them (possibly none: an identity). A
// MlpPipelineStage runs the chunks one pipeline rank holds, as shardopt::PipelineStage. Its
// backward recomputes the chunk's forward from the input the runner kept, so the stage itself
// holds nothing between calls. Gradients are those of mlp_loss_grad: the micro-batch's mean
// loss, times the data-parallel share of the micro-batch (batch_slice's weight).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlp.hpp"
#include "shardopt/pipeline.hpp"

namespace shardopt::examples {

constexpr int kMlpOps = 6;

// Chunk boundaries for `chunks` model chunks (chunk c holds ops [b[c], b[c+1])), chosen so that
// every rank of a pipeline of chunks / v ranks holds at least one tensor: 1, 2, 4 or 8 chunks.
std::vector<int> mlp_chunk_bounds(int chunks);

class MlpPipelineStage : public PipelineStage {
  public:
    // Pipeline rank `rank` of `stages`, holding chunks rank, rank + stages, ... of bounds.
    MlpPipelineStage(const MlpShape &shape, const Dataset &data, std::vector<int> bounds, int stages, int rank);

    // This rank's tensors (named as in mlp_tensors), one bucket per chunk.
    ParameterSet layout(DType dtype) const;
    // This rank's part of full packed parameters, and back.
    std::vector<double> slice(const std::vector<double> &full) const;
    void unslice(const std::vector<double> &part, std::vector<double> &full) const;

    // The samples of each micro-batch of the next batch and their weight (the share of the
    // micro-batch this data-parallel rank holds).
    void set_batch(std::vector<std::vector<std::int64_t>> micro_batches, std::vector<double> weights);
    // The whole batch [first, first + count) cut into m micro-batches, this rank's share of each.
    void set_batch(std::int64_t first, std::int64_t count, int micro_batches, int dp_rank, int dp_size);

    double forward(const StageCall &call, const Activation &input, Activation &output) override;
    void backward(const StageCall &call, const Activation &input, const Activation &output_grad,
                  Activation &input_grad) override;

  private:
    struct Op {
        int kind = 0;
        int tensor = -1; // in this rank's layout; -1 for relu and loss
    };
    std::vector<Op> ops_of(int chunk) const;
    const double *params(const StageCall &call, int tensor) const;
    int width_after(int op) const; // activation width after op (elements per sample)
    std::vector<double> apply(const StageCall &call, const Op &op, const std::vector<double> &in, double *loss) const;

    MlpShape shape_;
    const Dataset &data_;
    std::vector<int> bounds_;
    int stages_, rank_;
    std::vector<std::vector<std::int64_t>> samples_;
    std::vector<double> weights_;
};

} // namespace shardopt::examples
