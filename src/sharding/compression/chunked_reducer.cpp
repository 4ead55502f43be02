#include "chunked_reducer.hpp"

#include <algorithm>
#include <cstring>

#include "chunk_codec.hpp"
#include "chunk_residuals.hpp"
#include "comm/finish_quietly.hpp"
#include "shardopt/error.hpp"

namespace shardopt::compression {
namespace {

template <typename T> class ChunkedReducer final : public CompressedReducer {
  public:
    ChunkedReducer(CommunicatorPtr comm, const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode)
        : comm_(std::move(comm)), layout_(layout), mode_(mode), codec_(options, layout.dtype()),
          buckets_(std::size_t(layout.bucket_count())), residuals_(layout, options, mode) {
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
        for (int j = 0; j < p; ++j) // with a residual, what a payload misses stays for the next step
            codec_.encode(g + std::size_t(j) * s, s, f.send.data() + std::size_t(j) * pb,
                          residuals_.sent(bl.offset + std::size_t(j) * s));
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
        codec_.encode(sum, s, mine, residuals_.owned(bl.shard_offset));
        comm_->allgather(mine, f.recv.data(), pb, DType::u8);
        for (int j = 0; j < p; ++j) codec_.decode(f.recv.data() + std::size_t(j) * pb, s, f.bucket + std::size_t(j) * s);
    }

    void abandon() noexcept override {
        for (auto &f : buckets_) {
            for (auto &w : f.works) finish_quietly(w);
            f.works.clear();
        }
    }

    void clear_residuals() override { residuals_.clear(); }

    std::size_t state_bytes() const noexcept override {
        std::size_t total = residuals_.bytes() + sum_.size() * sizeof(T);
        for (const auto &f : buckets_) total += f.send.capacity() + f.recv.capacity();
        return total;
    }

    std::uint64_t bytes_sent() const noexcept override { return comm_->bytes_sent(); }

    std::vector<unsigned char> save_state() const override { return residuals_.save(); }
    bool load_state(const std::vector<unsigned char> &bytes) override { return residuals_.load(bytes); }

  private:
    struct InFlight {
        T *bucket = nullptr;
        unsigned char *shard_out = nullptr;
        std::vector<unsigned char> send, recv; // p payloads each, kept for the next step
        std::vector<WorkPtr> works;
    };

    CommunicatorPtr comm_;
    const ParameterSet &layout_;
    ReduceMode mode_;
    ChunkCodec codec_;
    std::vector<InFlight> buckets_;
    ChunkResiduals<T> residuals_;
    std::vector<T> sum_; // one chunk
};

} // namespace

std::size_t chunked_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode) {
    const std::size_t elem = layout.element_size(), p = std::size_t(layout.world_size());
    const ChunkCodec codec(options, layout.dtype());
    std::size_t residuals = 0;
    if (options.keeps_residuals()) residuals = layout.padded_count() + (mode == ReduceMode::allreduce ? layout.shard_count() : 0);
    std::size_t total = (residuals + layout.max_bucket_padded() / p) * elem; // residuals, sum_
    for (const auto &bl : layout.buckets()) total += 2 * p * codec.payload_bytes(bl.shard); // send, recv
    return total;
}

std::unique_ptr<CompressedReducer> make_chunked_reducer(CommunicatorPtr comm, const ParameterSet &layout,
                                                        const CompressionOptions &options, ReduceMode mode) {
    if (layout.dtype() == DType::f64) return std::make_unique<ChunkedReducer<double>>(std::move(comm), layout, options, mode);
    return std::make_unique<ChunkedReducer<float>>(std::move(comm), layout, options, mode);
}

} // namespace shardopt::compression
