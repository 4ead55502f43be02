#include "power_sgd_reducer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/finish_quietly.hpp"
#include "power_sgd_kernels.hpp"
#include "residual_state.hpp"
#include "shardopt/error.hpp"

namespace shardopt::compression {

bool power_sgd_compresses(const TensorLayout &tensor, const CompressionOptions &options) {
    if (tensor.rows < 2) return false;
    const std::size_t rows = tensor.rows, cols = tensor.count / tensor.rows, r = std::size_t(options.power_sgd_rank);
    return cols >= 2 && tensor.count >= options.power_sgd_min_elements && r < std::min(rows, cols) &&
           (rows + cols) * r < rows * cols;
}

namespace {

// Deterministic standard normals (splitmix64 + Box-Muller): every rank starts from the same Q.
double normal(std::uint64_t seed) {
    auto next = [&seed] {
        std::uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
    };
    const double u1 = std::max(next(), 1e-300), u2 = next();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Columns of p (rows x r, row-major) made orthonormal in order (modified Gram-Schmidt); a
// column that vanishes stays zero.
template <typename T> void orthogonalize(T *p, std::size_t rows, std::size_t r) {
    for (std::size_t k = 0; k < r; ++k) {
        for (std::size_t j = 0; j < k; ++j) {
            double dot = 0.0;
            for (std::size_t i = 0; i < rows; ++i) dot += double(p[i * r + k]) * double(p[i * r + j]);
            for (std::size_t i = 0; i < rows; ++i) p[i * r + k] = T(double(p[i * r + k]) - dot * double(p[i * r + j]));
        }
        double norm = 0.0;
        for (std::size_t i = 0; i < rows; ++i) norm += double(p[i * r + k]) * double(p[i * r + k]);
        norm = std::sqrt(norm);
        const double inv = norm > 1e-30 ? 1.0 / norm : 0.0;
        for (std::size_t i = 0; i < rows; ++i) p[i * r + k] = T(double(p[i * r + k]) * inv);
    }
}

template <typename T> class PowerSgdReducer final : public CompressedReducer {
  public:
    PowerSgdReducer(CommunicatorPtr comm, const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode)
        : comm_(std::move(comm)), layout_(layout), options_(options), mode_(mode), r_(std::size_t(options.power_sgd_rank)),
          buckets_(std::size_t(layout.bucket_count())) {
        std::size_t residual_at = 0, q_at = 0;
        for (int b = 0; b < layout_.bucket_count(); ++b) {
            const auto &bl = layout_.bucket(b);
            Bucket &bucket = buckets_[std::size_t(b)];
            std::size_t dense_from = bl.offset, packed = 0;
            for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
                const auto &tl = layout_.tensor(t);
                if (!power_sgd_compresses(tl, options_)) continue;
                if (tl.offset > dense_from) bucket.dense.push_back({dense_from - bl.offset, tl.offset - dense_from});
                dense_from = tl.offset + tl.count;
                Matrix m{t, tl.offset - bl.offset, tl.rows, tl.count / tl.rows, residual_at, q_at};
                residual_at += options_.keeps_residuals() ? tl.count : 0;
                q_at += m.cols * r_;
                bucket.matrices.push_back(m);
            }
            const std::size_t end = bl.offset + bl.count; // padding is zero: never sent
            if (end > dense_from) bucket.dense.push_back({dense_from - bl.offset, end - dense_from});
            for (const auto &d : bucket.dense) packed += d.count;
            bucket.dense_count = packed;
            for (const auto &m : bucket.matrices) packed += m.rows * r_;
            bucket.first_pack = packed;
        }
        residual_.assign(residual_at, T(0));
        q_.resize(q_at);
        std::size_t widest = 0;
        for (const auto &bucket : buckets_)
            for (const auto &m : bucket.matrices) widest = std::max(widest, m.cols);
        scratch_.resize(widest * (r_ + 1));
        std::size_t most_q = 0; // finish's Q pack, sized once for the bucket with the most
        for (const auto &bucket : buckets_) {
            std::size_t q = 0;
            for (const auto &m : bucket.matrices) q += m.cols * r_;
            most_q = std::max(most_q, q);
        }
        q_pack_.reserve(most_q);
        for (const auto &bucket : buckets_)
            for (const auto &m : bucket.matrices)
                for (std::size_t k = 0; k < m.cols * r_; ++k)
                    q_[m.q_at + k] = T(normal((std::uint64_t(m.tensor) << 32) + k));
    }
    ~PowerSgdReducer() override { abandon(); }

    void start(int b, unsigned char *bucket_bytes, unsigned char *shard_out) override {
        Bucket &bucket = buckets_[std::size_t(b)];
        require(!bucket.work, ErrorCode::internal, "compressed reduction of bucket started twice");
        bucket.data = reinterpret_cast<T *>(bucket_bytes);
        bucket.shard_out = shard_out;
        bucket.pack.resize(bucket.first_pack);
        T *out = bucket.pack.data();
        for (const auto &d : bucket.dense) out = std::copy_n(bucket.data + d.offset, d.count, out);
        for (const auto &m : bucket.matrices) { // M += residual; P = M Q
            power_sgd_kernels::project(bucket.data + m.offset, residual_.empty() ? nullptr : residual_.data() + m.residual_at,
                                       m.rows, m.cols, r_, q_.data() + m.q_at, out, scratch_.data());
            out += m.rows * r_;
        }
        bucket.work = comm_->allreduce_async(bucket.pack.data(), bucket.pack.data(), bucket.pack.size(),
                                             layout_.dtype(), ReduceOp::avg);
    }

    void finish(int b) override {
        Bucket &bucket = buckets_[std::size_t(b)];
        WorkPtr work = std::move(bucket.work);
        bucket.work.reset();
        work->wait();
        const T *in = bucket.pack.data();
        for (const auto &d : bucket.dense) {
            std::copy_n(in, d.count, bucket.data + d.offset);
            in += d.count;
        }
        // Q = M^T P for every matrix (P orthogonalized first), averaged in one allreduce.
        std::size_t q_count = 0;
        for (const auto &m : bucket.matrices) q_count += m.cols * r_;
        q_pack_.resize(q_count);
        T *qo = q_pack_.data();
        T *p = bucket.pack.data() + bucket.dense_count;
        for (const auto &m : bucket.matrices) {
            orthogonalize(p, m.rows, r_);
            power_sgd_kernels::project_back(bucket.data + m.offset, m.rows, m.cols, r_, p, qo, scratch_.data());
            qo += m.cols * r_;
            p += m.rows * r_;
        }
        if (q_count) comm_->allreduce(q_pack_.data(), q_pack_.data(), q_count, layout_.dtype(), ReduceOp::avg);
        // Every rank: M ~ P Q^T; the residual keeps what the approximation missed of this rank's M.
        const T *qi = q_pack_.data();
        p = bucket.pack.data() + bucket.dense_count;
        for (const auto &m : bucket.matrices) {
            power_sgd_kernels::reconstruct(bucket.data + m.offset,
                                           residual_.empty() ? nullptr : residual_.data() + m.residual_at, m.rows, m.cols,
                                           r_, p, qi, scratch_.data());
            std::copy_n(qi, m.cols * r_, q_.data() + m.q_at); // warm start
            qi += m.cols * r_;
            p += m.rows * r_;
        }
        if (mode_ == ReduceMode::reduce_scatter) {
            const auto &bl = layout_.bucket(b);
            std::memcpy(bucket.shard_out, bucket.data + std::size_t(comm_->rank()) * bl.shard, bl.shard * sizeof(T));
        }
    }

    void abandon() noexcept override {
        for (auto &bucket : buckets_) finish_quietly(bucket.work);
    }

    void clear_residuals() override { std::fill(residual_.begin(), residual_.end(), T(0)); }

    std::size_t state_bytes() const noexcept override {
        std::size_t total = (residual_.size() + q_.size() + q_pack_.capacity() + scratch_.size()) * sizeof(T);
        for (const auto &bucket : buckets_) total += bucket.pack.capacity() * sizeof(T);
        return total;
    }

    std::uint64_t bytes_sent() const noexcept override { return comm_->bytes_sent(); }

    std::vector<unsigned char> save_state() const override {
        return residual_state::save(options_.method, {&residual_, &q_});
    }
    bool load_state(const std::vector<unsigned char> &bytes) override {
        return residual_state::load(bytes, options_.method, {&residual_, &q_});
    }

  private:
    struct Matrix {
        int tensor;
        std::size_t offset; // in the bucket
        std::size_t rows, cols;
        std::size_t residual_at, q_at;
    };
    struct Range {
        std::size_t offset, count; // in the bucket
    };
    struct Bucket {
        std::vector<Matrix> matrices;
        std::vector<Range> dense;
        std::size_t dense_count = 0, first_pack = 0;
        std::vector<T> pack; // dense elements, then each matrix's P
        T *data = nullptr;
        unsigned char *shard_out = nullptr;
        WorkPtr work;
    };

    CommunicatorPtr comm_;
    const ParameterSet &layout_;
    CompressionOptions options_;
    ReduceMode mode_;
    std::size_t r_;
    std::vector<Bucket> buckets_;
    std::vector<T> residual_; // every compressed matrix's, back to back
    std::vector<T> q_;        // every compressed matrix's Q (cols x r), back to back
    std::vector<T> q_pack_;
    std::vector<T> scratch_; // the kernels' transposed Q and one row
};

} // namespace

std::size_t power_sgd_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options) {
    const std::size_t r = std::size_t(options.power_sgd_rank);
    std::size_t residual = 0, q = 0, most_q = 0, widest = 0, packs = 0;
    for (const auto &bl : layout.buckets()) {
        std::size_t bucket_q = 0, pack = 0;
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const auto &tl = layout.tensor(t);
            if (!power_sgd_compresses(tl, options)) {
                pack += tl.count; // sent dense
                continue;
            }
            const std::size_t cols = tl.count / tl.rows;
            residual += options.keeps_residuals() ? tl.count : 0;
            bucket_q += cols * r;
            pack += tl.rows * r;
            widest = std::max(widest, cols);
        }
        q += bucket_q;
        most_q = std::max(most_q, bucket_q);
        packs += pack;
    }
    return (residual + q + most_q + widest * (r + 1) + packs) * layout.element_size();
}

std::unique_ptr<CompressedReducer> make_power_sgd_reducer(CommunicatorPtr comm, const ParameterSet &layout,
                                                          const CompressionOptions &options, ReduceMode mode) {
    if (layout.dtype() == DType::f64)
        return std::make_unique<PowerSgdReducer<double>>(std::move(comm), layout, options, mode);
    return std::make_unique<PowerSgdReducer<float>>(std::move(comm), layout, options, mode);
}

} // namespace shardopt::compression
