#include "hierarchical_chunked_reducer.hpp"

#include <algorithm>
#include <cstring>
#include <deque>

#include "chunk_codec.hpp"
#include "chunk_residuals.hpp"
#include "comm/finish_quietly.hpp"
#include "shardopt/error.hpp"

namespace shardopt::compression {

std::vector<std::vector<int>> hierarchical_hosts(const std::vector<int> &host_of_ranks) {
    std::vector<std::vector<int>> hosts;
    for (std::size_t r = 0; r < host_of_ranks.size(); ++r) {
        const int h = host_of_ranks[r];
        if (h < 0) return {};
        if (std::size_t(h) >= hosts.size()) hosts.resize(std::size_t(h) + 1);
        hosts[std::size_t(h)].push_back(int(r));
    }
    if (hosts.size() < 2) return {};
    for (const auto &members : hosts)
        if (members.size() < 2 || members.size() != hosts.front().size()) return {};
    return hosts;
}

namespace {

// Moves chunk order[t] of data (order.size() chunks of `chunk` elements) to position t, in
// place: each cycle of the permutation with one chunk of scratch.
template <typename T>
void permute_chunks(T *data, std::size_t chunk, const std::vector<int> &order, std::vector<T> &scratch) {
    std::vector<bool> placed(order.size(), false);
    for (std::size_t start = 0; start < order.size(); ++start) {
        if (placed[start]) continue;
        placed[start] = true;
        if (std::size_t(order[start]) == start) continue;
        std::memcpy(scratch.data(), data + start * chunk, chunk * sizeof(T));
        for (std::size_t t = start;;) { // t's content was read (or saved) before t is written
            const std::size_t from = std::size_t(order[t]);
            placed[t] = true;
            std::memcpy(data + t * chunk, from == start ? scratch.data() : data + from * chunk, chunk * sizeof(T));
            if (from == start) break;
            t = from;
        }
    }
}

// Hosts of consecutive ranks (what launchers give): host h holds ranks h L ... h L + L - 1.
bool consecutive_hosts(const std::vector<std::vector<int>> &hosts) {
    for (std::size_t h = 0; h < hosts.size(); ++h)
        for (std::size_t l = 0; l < hosts[h].size(); ++l)
            if (hosts[h][l] != int(h * hosts[h].size() + l)) return false;
    return true;
}

template <typename T> class HierarchicalChunkedReducer final : public CompressedReducer {
  public:
    HierarchicalChunkedReducer(CommunicatorPtr comm, std::vector<std::vector<int>> hosts, const ParameterSet &layout,
                               const CompressionOptions &options, ReduceMode mode)
        : comm_(std::move(comm)), hosts_(std::move(hosts)), hosts_count_(hosts_.size()), per_host_(hosts_.front().size()),
          layout_(layout), mode_(mode), codec_(options, layout.dtype()), buckets_(std::size_t(layout.bucket_count())),
          residuals_(layout, options, mode) {
        for (std::size_t h = 0; h < hosts_count_; ++h)
            for (std::size_t l = 0; l < per_host_; ++l)
                if (hosts_[h][l] == comm_->rank()) host_ = int(h), local_rank_ = int(l);
        host_comm_ = comm_->split(host_, local_rank_);   // this host's ranks, local-rank order
        cross_comm_ = comm_->split(local_rank_, host_); // local rank l of every host, host order
        // The host reduce-scatter's input: segment l holds the chunks of local rank l of every host.
        for (std::size_t l = 0; l < per_host_; ++l)
            for (std::size_t h = 0; h < hosts_count_; ++h) host_order_.push_back(hosts_[h][l]);
        // Hosts of consecutive ranks (what launchers give): host h's chunks are one run, and one
        // reduce-scatter per host gives each local rank its chunk of it, with nothing reordered.
        consecutive_ = consecutive_hosts(hosts_);
        const std::size_t max_chunk = layout_.max_bucket_padded() / std::size_t(comm_->size());
        sum_.resize(max_chunk);
        if (!consecutive_) chunk_scratch_.resize(max_chunk);
        if (mode_ == ReduceMode::allreduce) { // phase two's buffers, sized once for the largest bucket
            const std::size_t pb = codec_.payload_bytes(max_chunk);
            mine_.reserve(pb);
            cross_gathered_.reserve(hosts_count_ * pb);
            gathered_.reserve(std::size_t(comm_->size()) * pb);
        }
    }
    ~HierarchicalChunkedReducer() override { abandon(); }

    void start(int b, unsigned char *bucket_bytes, unsigned char *shard_out) override {
        const std::size_t s = layout_.bucket(b).shard;
        InFlight &f = buckets_[std::size_t(b)];
        require(f.stage == Stage::idle, ErrorCode::internal, "compressed reduction of bucket started twice");
        f.bucket = reinterpret_cast<T *>(bucket_bytes);
        f.shard_out = shard_out;
        f.host_sum.resize(hosts_count_ * s);
        if (consecutive_) {
            for (std::size_t h = 0; h < hosts_count_; ++h)
                f.host_reduces.push_back(host_comm_->reduce_scatter_async(f.bucket + h * per_host_ * s, f.host_sum.data() + h * s,
                                                                          s, layout_.dtype(), ReduceOp::sum));
        } else {
            permute_chunks(f.bucket, s, host_order_, chunk_scratch_);
            f.host_reduces.push_back(host_comm_->reduce_scatter_async(f.bucket, f.host_sum.data(), hosts_count_ * s,
                                                                      layout_.dtype(), ReduceOp::sum));
        }
        f.stage = Stage::host_reducing;
        started_.push_back(b);
        // Earlier buckets whose host sums are in go onto the link now, not when finished.
        for (int earlier : started_) {
            InFlight &e = buckets_[std::size_t(earlier)];
            if (e.stage != Stage::host_reducing) continue;
            bool summed = true;
            for (auto &w : e.host_reduces) summed = summed && w->test();
            if (!summed) break;
            launch_cross(earlier);
        }
    }

    void finish(int b) override {
        require(!started_.empty() && started_.front() == b, ErrorCode::internal,
                "compressed reductions must finish in the order they started");
        started_.pop_front();
        launch_cross(b);
        // The later buckets' payloads cross the link while this one is decoded and gathered.
        for (int later : started_) launch_cross(later);
        const auto &bl = layout_.bucket(b);
        const std::size_t s = bl.shard, pb = codec_.payload_bytes(s);
        InFlight &f = buckets_[std::size_t(b)];
        std::vector<WorkPtr> works = std::move(f.works);
        f.works.clear();
        f.stage = Stage::idle;
        for (auto &w : works) w->wait();
        // Phase one's result: this rank's chunk, the hosts' partial sums added in host order, averaged.
        T *sum = sum_.data();
        std::fill(sum, sum + s, T(0));
        for (std::size_t h = 0; h < hosts_count_; ++h) codec_.decode_add(f.recv.data() + h * pb, s, sum);
        const T inv = T(1) / T(comm_->size());
        for (std::size_t k = 0; k < s; ++k) sum[k] *= inv;
        if (mode_ == ReduceMode::reduce_scatter) {
            std::memcpy(f.shard_out, sum, s * sizeof(T));
            return;
        }
        // Phase two: the owner's payload to the owners on the other hosts, then to its host.
        mine_.resize(pb);
        cross_gathered_.resize(hosts_count_ * pb);
        gathered_.resize(std::size_t(comm_->size()) * pb);
        codec_.encode(sum, s, mine_.data(), residuals_.owned(bl.shard_offset));
        cross_comm_->allgather(mine_.data(), cross_gathered_.data(), pb, DType::u8);
        host_comm_->allgather(cross_gathered_.data(), gathered_.data(), hosts_count_ * pb, DType::u8);
        for (std::size_t l = 0; l < per_host_; ++l) // gathered: [local rank][host] payloads
            for (std::size_t h = 0; h < hosts_count_; ++h)
                codec_.decode(gathered_.data() + (l * hosts_count_ + h) * pb, s, f.bucket + std::size_t(hosts_[h][l]) * s);
    }

    void abandon() noexcept override {
        for (auto &f : buckets_) {
            for (auto &w : f.host_reduces) f.works.push_back(std::move(w));
            f.host_reduces.clear();
            for (auto &w : f.works) finish_quietly(w);
            f.works.clear();
            f.stage = Stage::idle;
        }
        started_.clear();
    }

    void clear_residuals() override { residuals_.clear(); }

    std::size_t state_bytes() const noexcept override {
        std::size_t total = residuals_.bytes() + (sum_.size() + chunk_scratch_.size()) * sizeof(T);
        for (const auto &f : buckets_) total += f.host_sum.capacity() * sizeof(T) + f.send.capacity() + f.recv.capacity();
        return total + mine_.capacity() + cross_gathered_.capacity() + gathered_.capacity();
    }

    std::uint64_t bytes_sent() const noexcept override {
        return comm_->bytes_sent() + host_comm_->bytes_sent() + cross_comm_->bytes_sent();
    }

    std::vector<unsigned char> save_state() const override { return residuals_.save(); }
    bool load_state(const std::vector<unsigned char> &bytes) override { return residuals_.load(bytes); }

  private:
    enum class Stage { idle, host_reducing, crossing };
    struct InFlight {
        Stage stage = Stage::idle;
        T *bucket = nullptr;
        unsigned char *shard_out = nullptr;
        std::vector<T> host_sum;                // the host's partial sums of this local rank's H chunks
        std::vector<unsigned char> send, recv;  // H payloads each, kept for the next step
        std::vector<WorkPtr> host_reduces;
        std::vector<WorkPtr> works;
    };

    // Once the host's sum of bucket b is in: compresses its H chunks and sends each to its owner.
    void launch_cross(int b) {
        InFlight &f = buckets_[std::size_t(b)];
        if (f.stage != Stage::host_reducing) return;
        std::vector<WorkPtr> reduces = std::move(f.host_reduces);
        f.host_reduces.clear();
        for (auto &w : reduces) w->wait();
        const auto &bl = layout_.bucket(b);
        const std::size_t s = bl.shard, pb = codec_.payload_bytes(s);
        f.send.resize(hosts_count_ * pb);
        f.recv.resize(hosts_count_ * pb);
        for (std::size_t h = 0; h < hosts_count_; ++h) { // error feedback on what this rank sends: the host's sum
            const std::size_t owner = std::size_t(hosts_[h][std::size_t(local_rank_)]);
            codec_.encode(f.host_sum.data() + h * s, s, f.send.data() + h * pb, residuals_.sent(bl.offset + owner * s));
        }
        for (std::size_t h = 0; h < hosts_count_; ++h) // receives first: a peer's send may then land directly
            if (int(h) != host_) f.works.push_back(cross_comm_->recv_async(f.recv.data() + h * pb, pb, DType::u8, int(h), b));
        for (std::size_t h = 0; h < hosts_count_; ++h)
            if (int(h) != host_) f.works.push_back(cross_comm_->send_async(f.send.data() + h * pb, pb, DType::u8, int(h), b));
        std::memcpy(f.recv.data() + std::size_t(host_) * pb, f.send.data() + std::size_t(host_) * pb, pb);
        f.stage = Stage::crossing;
    }

    CommunicatorPtr comm_, host_comm_, cross_comm_;
    std::vector<std::vector<int>> hosts_; // host -> its ranks in comm_, ascending
    std::size_t hosts_count_, per_host_;
    int host_ = -1, local_rank_ = -1;
    std::vector<int> host_order_; // position t of the host reduce-scatter's input holds chunk host_order_[t]
    bool consecutive_ = false;    // host h holds ranks h L ... h L + L - 1
    const ParameterSet &layout_;
    ReduceMode mode_;
    ChunkCodec codec_;
    std::vector<InFlight> buckets_;
    ChunkResiduals<T> residuals_;
    std::deque<int> started_;             // buckets started and not finished, in start order
    std::vector<T> sum_, chunk_scratch_;  // one chunk each
    std::vector<unsigned char> mine_, cross_gathered_, gathered_; // phase two (one bucket at a time)
};

} // namespace

std::size_t hierarchical_chunked_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options,
                                               ReduceMode mode, const std::vector<std::vector<int>> &hosts) {
    const std::size_t elem = layout.element_size(), p = std::size_t(layout.world_size()), h = hosts.size();
    const ChunkCodec codec(options, layout.dtype());
    const std::size_t max_chunk = layout.max_bucket_padded() / p;
    std::size_t residuals = 0;
    if (options.keeps_residuals()) residuals = layout.padded_count() + (mode == ReduceMode::allreduce ? layout.shard_count() : 0);
    std::size_t total = (residuals + max_chunk + (consecutive_hosts(hosts) ? 0 : max_chunk)) * elem; // sum_, chunk_scratch_
    for (const auto &bl : layout.buckets()) total += h * bl.shard * elem + 2 * h * codec.payload_bytes(bl.shard);
    if (mode == ReduceMode::allreduce) total += (1 + h + p) * codec.payload_bytes(max_chunk); // mine_, cross_gathered_, gathered_
    return total;
}

std::unique_ptr<CompressedReducer> make_hierarchical_chunked_reducer(CommunicatorPtr comm, std::vector<std::vector<int>> hosts,
                                                                     const ParameterSet &layout,
                                                                     const CompressionOptions &options, ReduceMode mode) {
    require(!hosts.empty(), ErrorCode::internal, "hierarchical reducer without hosts");
    if (layout.dtype() == DType::f64)
        return std::make_unique<HierarchicalChunkedReducer<double>>(std::move(comm), std::move(hosts), layout, options, mode);
    return std::make_unique<HierarchicalChunkedReducer<float>>(std::move(comm), std::move(hosts), layout, options, mode);
}

} // namespace shardopt::compression
