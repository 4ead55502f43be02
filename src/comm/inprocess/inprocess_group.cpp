#include "inprocess_group.hpp"

#include <cstring>
#include <sstream>

namespace shardopt {

void InProcessGroup::throw_aborted() { throw Error(abort_code_, abort_reason_); }

std::string InProcessGroup::missing_ranks(const Slot &slot) const {
    std::ostringstream out;
    bool first = true;
    for (int r = 0; r < size_; ++r)
        if (!slot.arrived[r]) {
            out << (first ? "" : ", ") << r;
            first = false;
        }
    return out.str();
}

int InProcessGroup::departed_missing(const Slot &slot) const {
    for (int r = 0; r < size_; ++r)
        if (departed_[std::size_t(r)] && !slot.arrived[std::size_t(r)]) return r;
    return -1;
}

void InProcessGroup::fail_departed(int who, const std::string &what) {
    abort_reason_ = "rank " + std::to_string(who) +
                    " was lost: its communicator was closed (or its thread ended) while " + what;
    abort_code_ = ErrorCode::peer_lost;
    cv_.notify_all();
    throw_aborted();
}

void InProcessGroup::depart(int rank) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        departed_[std::size_t(rank)] = true;
    }
    cv_.notify_all();
}

static std::string ms_text(std::chrono::steady_clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

InProcessGroup::Slot &InProcessGroup::arrive(std::uint64_t seq, int rank, const Call &call,
                                             std::size_t scratch_bytes, Clock::time_point deadline,
                                             std::uint64_t fingerprint) {
    const auto start = Clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    if (!abort_reason_.empty()) throw_aborted();
    auto [it, created] = slots_.try_emplace(seq, size_);
    Slot &slot = it->second;
    if (created) slot.scratch.swap(spare_scratch_);
    // Nobody touches scratch before every rank arrived, so growing it here is safe.
    if (slot.scratch.size() < scratch_bytes) slot.scratch.resize(scratch_bytes);
    slot.calls[rank] = call;
    slot.fingerprints[rank] = fingerprint;
    slot.arrived[rank] = true;
    if (++slot.arrived_count == size_) cv_.notify_all();
    const bool all = cv_.wait_until(lock, deadline, [&] {
        return slot.arrived_count == size_ || !abort_reason_.empty() || departed_missing(slot) >= 0;
    });
    // Every rank arrived: the collective completes, even if one of them has since aborted the
    // group (it finished this call and failed later); the abort stops the next call.
    if (slot.arrived_count == size_) return slot;
    if (!abort_reason_.empty()) throw_aborted();
    if (const int gone = departed_missing(slot); gone >= 0)
        fail_departed(gone, "rank " + std::to_string(rank) + " waited for it in " + describe(call) +
                                " (collective #" + std::to_string(seq) + ")");
    if (!all) {
        std::string reason = describe(call) + " (collective #" + std::to_string(seq) + ") timed out after " +
                             ms_text(Clock::now() - start) + " on rank " + std::to_string(rank) +
                             ": ranks never arrived: " + missing_ranks(slot);
        abort_reason_ = reason;
        abort_code_ = ErrorCode::timeout;
        cv_.notify_all();
        throw Error(ErrorCode::timeout, reason);
    }
    return slot;
}

void InProcessGroup::finish_and_wait(std::uint64_t seq, Slot &slot, Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (++slot.finished_count == size_) cv_.notify_all();
    const bool all = cv_.wait_until(lock, deadline, [&] {
        return slot.finished_count == size_ || !abort_reason_.empty();
    });
    if (slot.finished_count == size_) return; // done everywhere: a later abort is the next call's
    if (!abort_reason_.empty()) throw_aborted();
    if (!all) {
        abort_reason_ = "collective #" + std::to_string(seq) + " timed out while ranks copied data";
        abort_code_ = ErrorCode::timeout;
        cv_.notify_all();
        throw Error(ErrorCode::timeout, abort_reason_);
    }
}

void InProcessGroup::leave(std::uint64_t seq, Slot &slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (++slot.left_count == size_) {
        if (slot.scratch.capacity() > spare_scratch_.capacity()) spare_scratch_.swap(slot.scratch);
        slots_.erase(seq);
    }
}

std::shared_ptr<InProcessGroup> InProcessGroup::child_group(Slot &slot, int color, int child_size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto &group = slot.split_groups[color];
    if (!group) group = std::make_shared<InProcessGroup>(child_size);
    return group;
}

void InProcessGroup::post_message(int source, int dest, int tag, const Call &call) {
    Message message;
    message.sent = call;
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    message.data.resize(bytes);
    if (bytes) std::memcpy(message.data.data(), call.send, bytes);
    message.sent.send = nullptr;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!abort_reason_.empty()) throw_aborted();
        mailboxes_[{source, dest, tag}].push_back(std::move(message));
    }
    cv_.notify_all();
}

void InProcessGroup::take_message(int source, int dest, int tag, const Call &recv_call,
                                  Clock::time_point deadline) {
    const auto start = Clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    auto &box = mailboxes_[{source, dest, tag}];
    const bool got = cv_.wait_until(lock, deadline, [&] {
        return !box.empty() || !abort_reason_.empty() || departed_[std::size_t(source)];
    });
    if (!abort_reason_.empty()) throw_aborted();
    if (box.empty() && departed_[std::size_t(source)])
        fail_departed(source, "rank " + std::to_string(dest) + " waited for its message in " + describe(recv_call));
    if (!got) {
        std::string reason = describe(recv_call) + " on rank " + std::to_string(dest) + " timed out after " +
                             ms_text(Clock::now() - start) + ": rank " + std::to_string(source) +
                             " never sent a matching message";
        abort_reason_ = reason;
        abort_code_ = ErrorCode::timeout;
        cv_.notify_all();
        throw Error(ErrorCode::timeout, reason);
    }
    Message message = std::move(box.front());
    box.pop_front();
    lock.unlock();
    if (message.sent.count != recv_call.count || message.sent.dtype != recv_call.dtype) {
        std::string reason = "point-to-point mismatch: rank " + std::to_string(dest) + " called " +
                             describe(recv_call) + " but rank " + std::to_string(source) + " called " +
                             describe(message.sent);
        abort(reason, ErrorCode::mismatch);
        throw Error(ErrorCode::mismatch, reason);
    }
    if (!message.data.empty()) std::memcpy(recv_call.recv, message.data.data(), message.data.size());
}

void InProcessGroup::abort(const std::string &reason, ErrorCode code) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!abort_reason_.empty()) return;
        abort_reason_ = reason;
        abort_code_ = code;
    }
    cv_.notify_all();
}

} // namespace shardopt
