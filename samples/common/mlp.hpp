// The demo model: a 2-layer MLP classifier (ReLU hidden layer, softmax cross-entropy) on a
// synthetic, deterministic data set of Gaussian blobs. Used by the demo, the samples and the
// equivalence tests. Forward/backward are written out by hand so the example needs nothing but
// the library; they also come in tensor-parallel and pipeline-stage forms for the hybrid tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardopt::examples {

struct MlpShape {
    int inputs = 16;
    int hidden = 32;
    int classes = 4;
    std::size_t parameter_count() const {
        return std::size_t(hidden) * inputs + hidden + std::size_t(classes) * hidden + classes;
    }
};

// Tensors in registration order: "fc1.weight" [hidden x inputs], "fc1.bias" [hidden],
// "fc2.weight" [classes x hidden], "fc2.bias" [classes]; the packed layout concatenates them.
std::vector<std::pair<std::string, std::size_t>> mlp_tensors(const MlpShape &shape);

struct Dataset {
    int features = 0;
    int classes = 0;
    std::vector<double> x; // samples x features, row-major
    std::vector<int> y;
    std::size_t size() const { return y.size(); }
};

// Deterministic: the same arguments give the same data on every rank and every machine.
Dataset make_blobs(std::size_t samples, int features, int classes, std::uint64_t seed = 7);

// Deterministic small random initialization (packed layout), scaled like PyTorch's default.
template <typename T> std::vector<T> mlp_init(const MlpShape &shape, std::uint64_t seed = 11);

// Mean loss over samples[0..n) at `params` (packed), writing the mean gradient into `grad`
// (packed; overwritten). Returns the loss.
template <typename T>
double mlp_loss_grad(const MlpShape &shape, const Dataset &data, const T *params, T *grad, const std::int64_t *samples,
                     std::size_t n);

// Fraction of samples classified correctly.
template <typename T> double mlp_accuracy(const MlpShape &shape, const Dataset &data, const T *params);

} // namespace shardopt::examples
