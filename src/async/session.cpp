#include "session.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "../training/trainer.hpp"
#include "shard_copy.hpp"
#include "shardopt/error.hpp"

namespace shardopt::async {
namespace {

ReplyHeader account_of(const ClockKeeper &keeper) {
    ReplyHeader a;
    a.epoch_loss = keeper.epoch_loss();
    a.late_gradients = keeper.late_gradients();
    a.skipped_clocks = keeper.skipped_clocks();
    a.max_staleness = keeper.max_staleness();
    a.max_lead = keeper.max_lead();
    return a;
}

// What a failure on the notice channel of worker w means in the world's rank numbers (on that
// two-rank channel, w is rank 1).
Error notice_error(const Error &e, int w) {
    const std::string who = "rank " + std::to_string(w);
    switch (e.code()) {
    case ErrorCode::peer_lost:
        return Error(e.code(), who + " was lost while rank 0 waited for its gradient notice (on its notice channel " +
                                   who + " is rank 1): " + e.what());
    case ErrorCode::timeout:
        return Error(e.code(), who + " sent no gradient notice within the timeout (on its notice channel " + who +
                                   " is rank 1): " + e.what());
    default: return Error(e.code(), who + "'s gradient notice: " + e.what());
    }
}

} // namespace

Session::Session(AsyncSgdOptimizer::State &state, std::vector<std::int64_t> clock_samples, int epoch,
                 std::int64_t first_step, std::function<void(std::int64_t)> before_update)
    : s_(state), clock_samples_(std::move(clock_samples)), epoch_(epoch), first_step_(first_step),
      before_update_(std::move(before_update)), rank_(state.rank()), size_(state.size()),
      shard_bytes_(state.owner->shard_bytes()), send_buffer_(sizeof(GradientHeader) + shard_bytes_),
      reply_buffers_(std::size_t(size_), std::vector<unsigned char>(sizeof(ReplyHeader) + shard_bytes_)),
      grad_buffer_(sizeof(GradientHeader) + shard_bytes_), reply_buffer_(sizeof(ReplyHeader) + shard_bytes_) {
    require(!clock_samples_.empty(), ErrorCode::invalid_argument, "async SGD: a session needs at least one clock");
    s_.channels->set_timeout(s_.world->timeout());
    try {
        if (rank_ == 0) {
            receivers_.resize(std::size_t(size_));
            for (int w = 1; w < size_; ++w) receivers_[std::size_t(w)].armed = true; // every worker pushes step 0
            for (int w = 1; w < size_; ++w)
                receivers_[std::size_t(w)].thread = std::thread([this, w] { receiver_main(w); });
        }
        server_ = std::thread([this] { server_main(); });
    } catch (...) { // a thread could not start: the ones that did must not outlive this
        record_failure(std::current_exception());
        stop_threads();
        throw;
    }
}

Session::~Session() {
    if (joined_) return;
    // Left without finish() or fail(): whatever is in flight must not wait for a worker that is gone.
    record_failure(std::make_exception_ptr(
        Error(ErrorCode::invalid_state, "async SGD: rank " + std::to_string(rank_) + " left the session early")));
    stop_threads();
}

// --- failures -----------------------------------------------------------------------------------

void Session::record_failure(std::exception_ptr error) noexcept {
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!failure_) {
            failure_ = error;
            first = true;
        }
        stopping_ = true;
    }
    cv_.notify_all();
    if (!first) return;
    ErrorCode code = ErrorCode::internal;
    std::string reason = "unknown failure";
    try {
        std::rethrow_exception(error);
    } catch (const Error &e) {
        code = e.code();
        reason = e.what();
    } catch (const std::exception &e) {
        reason = e.what();
    } catch (...) {
    }
    // Wakes every thread of this rank blocked on a channel, and tells the peers.
    try {
        s_.channels->abort(reason, code);
        s_.world->abort(reason, code);
    } catch (...) { // aborting is best effort: the failure is kept either way
    }
}

void Session::stop_threads() noexcept {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (server_.joinable()) server_.join();
    for (auto &r : receivers_)
        if (r.thread.joinable()) r.thread.join();
    joined_ = true;
}

void Session::rethrow_first() {
    std::exception_ptr first;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        first = failure_;
    }
    if (!first) first = std::make_exception_ptr(Error(ErrorCode::internal, "async SGD: failure without an error"));
    std::rethrow_exception(first);
}

void Session::fail() {
    record_failure(std::current_exception());
    stop_threads();
    rethrow_first();
}

std::int64_t Session::finish() {
    if (server_.joinable()) server_.join(); // its waits are bounded; it ends once every worker is done
    stop_threads();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!failure_) return applied_;
    }
    rethrow_first();
}

// --- worker side --------------------------------------------------------------------------------

void Session::push(std::int64_t label, std::int64_t version, double loss, const unsigned char *padded_grad) {
    try {
        GradientHeader h;
        h.seq = seq_;
        h.label = label;
        h.version = version;
        std::memcpy(send_buffer_.data(), &h, sizeof h);
        for (int k = 0; k < size_; ++k) {
            copy_shard_out(s_.layout, k, padded_grad, send_buffer_.data() + sizeof h);
            s_.channels->grads.send(send_buffer_.data(), send_buffer_.size(), k, kGradientTag);
        }
        // The notice goes after the gradients: when rank 0 reads it, every owner's shard is sent.
        PushNotice n;
        n.worker = rank_;
        n.seq = seq_;
        n.label = label;
        n.version = version;
        n.loss = loss;
        if (rank_ == 0) deliver(n);
        else s_.channels->notices[std::size_t(rank_)]->send(&n, sizeof n, DType::u8, 0, kNoticeTag);
        ++seq_;
    } catch (...) {
        fail();
    }
}

Session::Handed Session::receive() {
    try {
        for (int k = 0; k < size_; ++k)
            s_.channels->params.recv(reply_buffers_[std::size_t(k)].data(), reply_buffers_[std::size_t(k)].size(), k,
                                     kReplyTag);
    } catch (...) {
        fail();
    }
    Handed out;
    std::memcpy(&out.account, reply_buffers_[0].data(), sizeof out.account);
    out.version = out.account.version;
    out.label = out.account.label;
    for (int k = 0; k < size_; ++k) {
        ReplyHeader h;
        std::memcpy(&h, reply_buffers_[std::size_t(k)].data(), sizeof h);
        if (h.version != out.version || h.label != out.label) {
            record_failure(std::make_exception_ptr(Error(
                ErrorCode::internal, "async SGD protocol: rank " + std::to_string(rank_) + " was handed version " +
                                         std::to_string(out.version) + " by rank 0 but version " +
                                         std::to_string(h.version) + " by rank " + std::to_string(k))));
            stop_threads();
            rethrow_first();
        }
        copy_shard_in(s_.layout, k, reply_buffers_[std::size_t(k)].data() + sizeof h, s_.view.data());
    }
    return out;
}

void Session::deliver(const PushNotice &notice) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(notice);
    }
    cv_.notify_all();
}

// --- server side --------------------------------------------------------------------------------

void Session::server_main() {
    try {
        if (rank_ == 0) keeper_loop();
        else follower_loop();
    } catch (...) {
        record_failure(std::current_exception());
    }
}

void Session::keeper_loop() {
    ClockKeeper keeper(size_, s_.staleness(), clock_samples_);
    std::vector<Member> members;
    while (!keeper.finished()) {
        const Decision d = keeper.next();
        if (d.kind == Decision::Kind::wait) {
            const PushNotice n = take_notice(keeper);
            keeper.pushed(Push{n.worker, n.seq, n.label, n.version, n.loss});
            continue;
        }
        Command c;
        if (d.kind == Decision::Kind::apply) {
            // As DDP's train(): a loss that is not finite stops training on every rank.
            training::require_finite_loss(d.loss, Dataset::training, epoch_, first_step_ + d.clock,
                                          ("the " + std::to_string(d.members.size()) + " gradients of its update").c_str());
            members.clear();
            for (const Push &p : d.members) members.push_back(Member{p.worker, 0, p.seq});
            c.kind = CommandKind::apply;
            c.clock = d.clock;
            c.members = std::int64_t(members.size());
            for (int k = 1; k < size_; ++k) {
                s_.channels->grads.send(&c, sizeof c, k, kCommandTag);
                s_.channels->grads.send(members.data(), members.size() * sizeof(Member), k, kMembersTag);
            }
            apply_update(members.data(), members.size());
            continue;
        }
        c.kind = CommandKind::serve;
        c.worker = d.worker;
        c.clock = d.clock;
        c.label = d.label;
        for (int k = 1; k < size_; ++k) s_.channels->grads.send(&c, sizeof c, k, kCommandTag);
        const bool done = d.label >= clocks();
        const ReplyHeader account = account_of(keeper);
        hand_out(d.worker, d.clock, d.label, done ? &account : nullptr);
        if (!done && d.worker != 0) arm(d.worker);
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true; // no notice is due: the receivers end
    }
    cv_.notify_all();
}

void Session::follower_loop() {
    std::vector<Member> members;
    int done = 0;
    while (done < size_) {
        Command c;
        s_.channels->grads.recv(&c, sizeof c, 0, kCommandTag);
        if (c.kind == CommandKind::apply) {
            require(c.members >= 1 && c.members <= std::int64_t(size_) * (std::int64_t(s_.staleness()) + 2),
                    ErrorCode::internal, "async SGD protocol: an update of " + std::to_string(c.members) + " gradients");
            members.resize(std::size_t(c.members));
            s_.channels->grads.recv(members.data(), members.size() * sizeof(Member), 0, kMembersTag);
            apply_update(members.data(), members.size());
        } else if (c.kind == CommandKind::serve) {
            hand_out(c.worker, c.clock, c.label, nullptr);
            if (c.label >= clocks()) ++done;
        } else {
            throw Error(ErrorCode::internal, "async SGD protocol: unknown command " + std::to_string(int(c.kind)));
        }
    }
}

void Session::apply_update(const Member *members, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        s_.channels->grads.recv(grad_buffer_.data(), grad_buffer_.size(), members[i].worker, kGradientTag);
        GradientHeader h;
        std::memcpy(&h, grad_buffer_.data(), sizeof h);
        require(h.seq == members[i].seq, ErrorCode::internal,
                "async SGD protocol: rank " + std::to_string(rank_) + " expected push " + std::to_string(members[i].seq) +
                    " of rank " + std::to_string(members[i].worker) + ", got push " + std::to_string(h.seq));
        s_.owner->add_gradient(grad_buffer_.data() + sizeof h);
    }
    if (before_update_) before_update_(applied_);
    s_.owner->apply();
    ++applied_;
}

void Session::hand_out(int worker, std::int64_t version, std::int64_t label, const ReplyHeader *account) {
    require(version == applied_, ErrorCode::internal,
            "async SGD protocol: rank " + std::to_string(rank_) + " is to hand out version " + std::to_string(version) +
                " but holds version " + std::to_string(applied_));
    ReplyHeader h;
    if (account) h = *account;
    h.version = version;
    h.label = label;
    std::memcpy(reply_buffer_.data(), &h, sizeof h);
    std::memcpy(reply_buffer_.data() + sizeof h, s_.owner->master(), shard_bytes_);
    s_.channels->params.send(reply_buffer_.data(), reply_buffer_.size(), worker, kReplyTag);
}

// --- rank 0's notice receivers ------------------------------------------------------------------

void Session::arm(int worker) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        receivers_[std::size_t(worker)].armed = true;
    }
    cv_.notify_all();
}

void Session::receiver_main(int w) {
    try {
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait(lock, [&] { return stopping_ || receivers_[std::size_t(w)].armed; });
                if (stopping_) return;
            }
            PushNotice n;
            try {
                s_.channels->notices[std::size_t(w)]->recv(&n, sizeof n, DType::u8, 1, kNoticeTag);
            } catch (const Error &e) {
                throw notice_error(e, w);
            }
            require(n.worker == w, ErrorCode::internal,
                    "async SGD protocol: a notice of rank " + std::to_string(n.worker) + " on rank " + std::to_string(w) +
                        "'s notice channel");
            {
                std::lock_guard<std::mutex> lock(mutex_);
                receivers_[std::size_t(w)].armed = false;
                queue_.push_back(n);
            }
            cv_.notify_all();
        }
    } catch (...) {
        record_failure(std::current_exception());
    }
}

PushNotice Session::take_notice(const ClockKeeper &keeper) {
    const auto timeout = s_.world->timeout();
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || failure_; }))
        throw Error(ErrorCode::timeout, "async SGD: rank 0 waited " + std::to_string(timeout.count()) +
                                            " ms for a gradient while " + keeper.awaiting());
    if (failure_) throw Error(ErrorCode::invalid_state, "async SGD: the session failed");
    const PushNotice n = queue_.front();
    queue_.pop_front();
    return n;
}

} // namespace shardopt::async
