// start_async_save: the shard written by a thread of its own, the manifest by another on rank 0,
// and the agreements between them on the caller's thread, each entered only when every rank is
// ready for it (AsyncCheckpoint::poll). The threads touch only the ShardedSave and the files.
#include "async_save.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include "shardopt/error.hpp"

namespace shardopt {
namespace {

using Clock = std::chrono::steady_clock;

class AsyncSave final : public AsyncCheckpoint {
  public:
    AsyncSave(std::unique_ptr<checkpoint::ShardedSave> save, Communicator &world, std::function<void()> quiesce,
              double snapshot_seconds)
        : save_(std::move(save)), world_(world), quiesce_(std::move(quiesce)), snapshot_seconds_(snapshot_seconds) {
        for (const auto &c : save_->copies) snapshot_bytes_ += c.size();
        writer_ = std::thread([this] {
            const auto start = Clock::now();
            checkpoint::write_shard(*save_);
            save_->data.clear(); // written: the snapshot's memory goes at once
            save_->copies.clear();
            save_->copies.shrink_to_fit();
            write_seconds_.store(std::chrono::duration<double>(Clock::now() - start).count());
            written_.store(true, std::memory_order_release);
        });
    }

    ~AsyncSave() override {
        if (writer_.joinable()) writer_.join();
        if (manifest_writer_.joinable()) manifest_writer_.join();
    }

    std::int64_t step_count() const noexcept override { return save_->step_count; }
    const std::string &directory() const noexcept override { return save_->dir; }
    std::size_t snapshot_bytes() const noexcept override { return snapshot_bytes_; }
    double snapshot_seconds() const noexcept override { return snapshot_seconds_; }
    double write_seconds() const noexcept override { return write_seconds_.load(); }
    bool written() const noexcept override { return written_.load(std::memory_order_acquire); }
    bool complete() const noexcept override { return stage_ == Stage::complete; }

    bool poll() override { return advance(false); }
    void finish() override { advance(true); }

  private:
    enum class Stage { writing, manifest, complete, failed };

    // One stage further where every rank is ready for it (wait: wait until each rank is).
    bool advance(bool wait) {
        require(stage_ != Stage::failed, ErrorCode::invalid_state,
                "AsyncCheckpoint: its publication already failed");
        try {
            if (stage_ == Stage::writing && ready_everywhere(wait, writer_, written_)) {
                checkpoint::agree_sharded_save(world_, *save_);
                if (world_.rank() == 0)
                    manifest_writer_ = std::thread([this] {
                        checkpoint::write_manifest(*save_);
                        manifest_written_.store(true, std::memory_order_release);
                    });
                else
                    manifest_written_.store(true, std::memory_order_release);
                stage_ = Stage::manifest;
            }
            if (stage_ == Stage::manifest && ready_everywhere(wait, manifest_writer_, manifest_written_)) {
                checkpoint::agree_manifest(world_, *save_);
                stage_ = Stage::complete;
            }
        } catch (...) {
            stage_ = Stage::failed;
            throw;
        }
        return stage_ == Stage::complete;
    }

    // Collective: whether `done` holds on every rank (after joining `thread` when waiting).
    bool ready_everywhere(bool wait, std::thread &thread, const std::atomic<bool> &done) {
        if (wait && thread.joinable()) thread.join();
        if (quiesce_) quiesce_();
        std::int32_t all = done.load(std::memory_order_acquire) ? 1 : 0;
        world_.allreduce(&all, &all, 1, DType::i32, ReduceOp::min);
        if (all == 1 && thread.joinable()) thread.join(); // it has ended: nothing to wait for
        return all == 1;
    }

    std::unique_ptr<checkpoint::ShardedSave> save_;
    Communicator &world_;
    std::function<void()> quiesce_;
    double snapshot_seconds_ = 0.0;
    std::size_t snapshot_bytes_ = 0;
    std::atomic<double> write_seconds_{0.0};
    std::atomic<bool> written_{false}, manifest_written_{false};
    Stage stage_ = Stage::writing;
    std::thread writer_, manifest_writer_;
};

} // namespace

std::unique_ptr<AsyncCheckpoint> start_async_save(std::unique_ptr<checkpoint::ShardedSave> save,
                                                  Communicator &world, std::function<void()> quiesce,
                                                  double snapshot_seconds) {
    require(save != nullptr, ErrorCode::invalid_argument, "start_async_save: no save");
    return std::make_unique<AsyncSave>(std::move(save), world, std::move(quiesce), snapshot_seconds);
}

} // namespace shardopt
