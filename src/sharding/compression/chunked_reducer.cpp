#include "chunked_reducer.hpp"

#include <algorithm>
#include <cstring>

#include "chunk_codec.hpp"
#include "residual_state.hpp"
#include "shardopt/error.hpp"

namespace shardopt::compression {
namespace {

template <typename T> class ChunkedReducer final : public CompressedReducer {
  public:
    ChunkedReducer(CommunicatorPtr comm, const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode)
        : comm_(std::move(comm)), layout_(layout), options_(options), mode_(mode), codec_(options, layout.dtype()),
          buckets_(std::size_t(layout.bucket_count())) {
        if (options_.keeps_residuals()) {
            residual_.assign(layout_.padded_count(), T(0));
            if (mode_ == ReduceMode::allreduce) server_residual_.assign(layout_.shard_count(), T(0));
        }
        sum_.resize(layout_.max_bucket_padded() / std::size_t(comm_->size()));
    }
    ~ChunkedReducer() override { abandon(); }

    void start(int b, unsigned char *bucket_bytes, unsigned char *shard_out) override {
        const auto &bl = layout_.bucket(b);
        const int p = comm_->size(), r = comm_->rank();
        const std::size_t s = bl.shard, pb = codec_.payload_bytes(s);
        InFlight &f = buckets_[std::size_t(b)];
        require(f.works.empty(), ErrorCode::internal, "compressed reduction of bucket started twice");
        f.bucket = reinterpret_cast<T *>(bucket_bytes);
        f.shard_out = shard_out;
        f.send.resize(std::size_t(p) * pb);
        f.recv.resize(std::size_t(p) * pb);
        T *g = f.bucket;
        T *res = residual_.empty() ? nullptr : residual_.data() + bl.offset;
        for (int j = 0; j < p; ++j) // with a residual, what a payload misses stays for the next step
            codec_.encode(g + std::size_t(j) * s, s, f.send.data() + std::size_t(j) * pb,
                          res ? res + std::size_t(j) * s : nullptr);
        // Receives first: a peer's send may then land directly.
        for (int i = 0; i < p; ++i)
            if (i != r) f.works.push_back(comm_->recv_async(f.recv.data() + std::size_t(i) * pb, pb, DType::u8, i, b));
        for (int j = 0; j < p; ++j)
            if (j != r) f.works.push_back(comm_->send_async(f.send.data() + std::size_t(j) * pb, pb, DType::u8, j, b));
        std::memcpy(f.recv.data() + std::size_t(r) * pb, f.send.data() + std::size_t(r) * pb, pb);
    }

    void finish(int b) override {
        const auto &bl = layout_.bucket(b);
        const int p = comm_->size(), r = comm_->rank();
        const std::size_t s = bl.shard, pb = codec_.payload_bytes(s);
        InFlight &f = buckets_[std::size_t(b)];
        std::vector<WorkPtr> works = std::move(f.works);
        f.works.clear();
        for (auto &w : works) w->wait();
        // Phase one's result: this rank's chunk, summed in rank order, averaged.
        T *sum = sum_.data();
        std::fill(sum, sum + s, T(0));
        for (int i = 0; i < p; ++i) codec_.decode_add(f.recv.data() + std::size_t(i) * pb, s, sum);
        const T inv = T(1) / T(p);
        for (std::size_t k = 0; k < s; ++k) sum[k] *= inv;
        if (mode_ == ReduceMode::reduce_scatter) {
            std::memcpy(f.shard_out, sum, s * sizeof(T));
            return;
        }
        // Phase two: the reduced chunk compressed once (plus the owner's residual), allgathered,
        // and every rank decodes the same bytes.
        unsigned char *mine = f.send.data() + std::size_t(r) * pb; // its own chunk was never sent
        T *server = server_residual_.empty() ? nullptr : server_residual_.data() + bl.shard_offset;
        codec_.encode(sum, s, mine, server);
        comm_->allgather(mine, f.recv.data(), pb, DType::u8);
        for (int j = 0; j < p; ++j) codec_.decode(f.recv.data() + std::size_t(j) * pb, s, f.bucket + std::size_t(j) * s);
    }

    void abandon() noexcept override {
        for (auto &f : buckets_) {
            for (auto &w : f.works) try {
                    w->wait();
                } catch (...) { // failed: it is over, which is all that matters here
                }
            f.works.clear();
        }
    }

    void clear_residuals() override {
        std::fill(residual_.begin(), residual_.end(), T(0));
        std::fill(server_residual_.begin(), server_residual_.end(), T(0));
    }

    std::size_t state_bytes() const noexcept override {
        std::size_t total = (residual_.size() + server_residual_.size() + sum_.size()) * sizeof(T);
        for (const auto &f : buckets_) total += f.send.capacity() + f.recv.capacity();
        return total;
    }

    std::uint64_t bytes_sent() const noexcept override { return comm_->bytes_sent(); }

    std::vector<unsigned char> save_state() const override {
        return residual_state::save(options_.method, {&residual_, &server_residual_});
    }
    bool load_state(const std::vector<unsigned char> &bytes) override {
        return residual_state::load(bytes, options_.method, {&residual_, &server_residual_});
    }

  private:
    struct InFlight {
        T *bucket = nullptr;
        unsigned char *shard_out = nullptr;
        std::vector<unsigned char> send, recv; // p payloads each, kept for the next step
        std::vector<WorkPtr> works;
    };

    CommunicatorPtr comm_;
    const ParameterSet &layout_;
    CompressionOptions options_;
    ReduceMode mode_;
    ChunkCodec codec_;
    std::vector<InFlight> buckets_;
    std::vector<T> residual_;        // this rank's, every bucket (padded flat layout)
    std::vector<T> server_residual_; // of the chunks this rank reduces (shard layout)
    std::vector<T> sum_;             // one chunk
};

} // namespace

std::unique_ptr<CompressedReducer> make_chunked_reducer(CommunicatorPtr comm, const ParameterSet &layout,
                                                        const CompressionOptions &options, ReduceMode mode) {
    if (layout.dtype() == DType::f64) return std::make_unique<ChunkedReducer<double>>(std::move(comm), layout, options, mode);
    return std::make_unique<ChunkedReducer<float>>(std::move(comm), layout, options, mode);
}

} // namespace shardopt::compression
