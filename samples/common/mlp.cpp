#include "mlp.hpp"

#include <algorithm>
#include <cmath>

namespace shardopt::examples {
namespace {

// SplitMix64: a tiny, well-known generator; enough for reproducible synthetic data.
struct Rng {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); } // [0,1)
    double normal() {
        const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
};

} // namespace

std::vector<std::pair<std::string, std::size_t>> mlp_tensors(const MlpShape &s) {
    return {{"fc1.weight", std::size_t(s.hidden) * s.inputs},
            {"fc1.bias", std::size_t(s.hidden)},
            {"fc2.weight", std::size_t(s.classes) * s.hidden},
            {"fc2.bias", std::size_t(s.classes)}};
}

Dataset make_blobs(std::size_t samples, int features, int classes, std::uint64_t seed) {
    Rng rng{seed};
    Dataset d;
    d.features = features;
    d.classes = classes;
    std::vector<double> centers(std::size_t(classes) * features);
    for (auto &c : centers) c = rng.normal() * 2.0;
    d.x.resize(samples * features);
    d.y.resize(samples);
    for (std::size_t i = 0; i < samples; ++i) {
        const int label = int(rng.next() % std::uint64_t(classes));
        d.y[i] = label;
        for (int f = 0; f < features; ++f) d.x[i * features + f] = centers[std::size_t(label) * features + f] + rng.normal();
    }
    return d;
}

template <typename T> std::vector<T> mlp_init(const MlpShape &s, std::uint64_t seed) {
    Rng rng{seed};
    std::vector<T> p;
    p.reserve(s.parameter_count());
    auto layer = [&](int fan_in, std::size_t weights, std::size_t biases) {
        const double bound = 1.0 / std::sqrt(double(fan_in));
        for (std::size_t i = 0; i < weights + biases; ++i) p.push_back(T((rng.uniform() * 2.0 - 1.0) * bound));
    };
    layer(s.inputs, std::size_t(s.hidden) * s.inputs, s.hidden);
    layer(s.hidden, std::size_t(s.classes) * s.hidden, s.classes);
    return p;
}

template <typename T>
double mlp_loss_grad(const MlpShape &s, const Dataset &data, const T *params, T *grad, const std::int64_t *samples,
                     std::size_t n) {
    const int I = s.inputs, H = s.hidden, C = s.classes;
    const T *w1 = params, *b1 = w1 + std::size_t(H) * I, *w2 = b1 + H, *b2 = w2 + std::size_t(C) * H;
    T *gw1 = grad, *gb1 = gw1 + std::size_t(H) * I, *gw2 = gb1 + H, *gb2 = gw2 + std::size_t(C) * H;
    std::fill(grad, grad + s.parameter_count(), T(0));
    std::vector<T> x(I), h(H), logits(C), dlogits(C), dh(H);
    double loss = 0.0;
    const T inv_n = T(1) / T(n);
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t idx = std::size_t(samples[k]);
        for (int i = 0; i < I; ++i) x[i] = T(data.x[idx * I + i]);
        for (int j = 0; j < H; ++j) {
            T acc = b1[j];
            for (int i = 0; i < I; ++i) acc += w1[std::size_t(j) * I + i] * x[i];
            h[j] = acc > T(0) ? acc : T(0);
        }
        T max_logit = -INFINITY;
        for (int c = 0; c < C; ++c) {
            T acc = b2[c];
            for (int j = 0; j < H; ++j) acc += w2[std::size_t(c) * H + j] * h[j];
            logits[c] = acc;
            max_logit = std::max(max_logit, acc);
        }
        T denom = 0;
        for (int c = 0; c < C; ++c) denom += std::exp(logits[c] - max_logit);
        const int label = data.y[idx];
        loss += double(std::log(denom) - (logits[label] - max_logit));
        for (int c = 0; c < C; ++c) dlogits[c] = (std::exp(logits[c] - max_logit) / denom - (c == label ? T(1) : T(0))) * inv_n;
        std::fill(dh.begin(), dh.end(), T(0));
        for (int c = 0; c < C; ++c) {
            gb2[c] += dlogits[c];
            for (int j = 0; j < H; ++j) {
                gw2[std::size_t(c) * H + j] += dlogits[c] * h[j];
                dh[j] += w2[std::size_t(c) * H + j] * dlogits[c];
            }
        }
        for (int j = 0; j < H; ++j) {
            if (h[j] <= T(0)) continue;
            gb1[j] += dh[j];
            for (int i = 0; i < I; ++i) gw1[std::size_t(j) * I + i] += dh[j] * x[i];
        }
    }
    return loss / double(n);
}

template <typename T> double mlp_accuracy(const MlpShape &s, const Dataset &data, const T *params) {
    const int I = s.inputs, H = s.hidden, C = s.classes;
    const T *w1 = params, *b1 = w1 + std::size_t(H) * I, *w2 = b1 + H, *b2 = w2 + std::size_t(C) * H;
    std::size_t correct = 0;
    std::vector<T> h(H);
    for (std::size_t idx = 0; idx < data.size(); ++idx) {
        for (int j = 0; j < H; ++j) {
            T acc = b1[j];
            for (int i = 0; i < I; ++i) acc += w1[std::size_t(j) * I + i] * T(data.x[idx * I + i]);
            h[j] = acc > T(0) ? acc : T(0);
        }
        int best = 0;
        T best_logit = -INFINITY;
        for (int c = 0; c < C; ++c) {
            T acc = b2[c];
            for (int j = 0; j < H; ++j) acc += w2[std::size_t(c) * H + j] * h[j];
            if (acc > best_logit) best_logit = acc, best = c;
        }
        correct += best == data.y[idx];
    }
    return double(correct) / double(data.size());
}

template std::vector<float> mlp_init<float>(const MlpShape &, std::uint64_t);
template std::vector<double> mlp_init<double>(const MlpShape &, std::uint64_t);
template double mlp_loss_grad<float>(const MlpShape &, const Dataset &, const float *, float *, const std::int64_t *,
                                     std::size_t);
template double mlp_loss_grad<double>(const MlpShape &, const Dataset &, const double *, double *,
                                      const std::int64_t *, std::size_t);
template double mlp_accuracy<float>(const MlpShape &, const Dataset &, const float *);
template double mlp_accuracy<double>(const MlpShape &, const Dataset &, const double *);

} // namespace shardopt::examples
