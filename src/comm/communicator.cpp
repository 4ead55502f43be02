// Communicator front end: argument validation, ordering of blocking and async calls, abort
// state. Backends see only validated calls, one at a time.
#include "shardopt/comm.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

#include "call_queue.hpp"

namespace shardopt {

class Communicator::Queue : public CallQueue {};

const char *call_kind_name(CallKind kind) noexcept {
    switch (kind) {
    case CallKind::allreduce: return "allreduce";
    case CallKind::reduce_scatter: return "reduce_scatter";
    case CallKind::allgather: return "allgather";
    case CallKind::broadcast: return "broadcast";
    case CallKind::reduce: return "reduce";
    case CallKind::barrier: return "barrier";
    case CallKind::send: return "send";
    case CallKind::recv: return "recv";
    case CallKind::split: return "split";
    }
    return "unknown";
}

std::string describe(const Call &call) {
    std::ostringstream out;
    out << call_kind_name(call.kind) << "(";
    switch (call.kind) {
    case CallKind::barrier: break;
    case CallKind::split: out << "color=" << call.root << ", key=" << call.tag; break;
    case CallKind::send:
    case CallKind::recv:
        out << "count=" << call.count << ", dtype=" << dtype_name(call.dtype) << ", peer=" << call.root
            << ", tag=" << call.tag;
        break;
    default:
        out << "count=" << call.count << ", dtype=" << dtype_name(call.dtype);
        if (call.kind == CallKind::allreduce || call.kind == CallKind::reduce_scatter ||
            call.kind == CallKind::reduce)
            out << ", op=" << reduce_op_name(call.op);
        if (call.kind == CallKind::broadcast || call.kind == CallKind::reduce) out << ", root=" << call.root;
    }
    out << ")";
    return out.str();
}

Communicator::Duration default_timeout_from_env() {
    if (const char *env = std::getenv("SHARDOPT_TIMEOUT_MS")) {
        char *end = nullptr;
        long long ms = std::strtoll(env, &end, 10);
        if (end != env && *end == '\0' && ms > 0) return Communicator::Duration(ms);
    }
    return Communicator::kDefaultTimeout;
}

namespace {

bool fingerprint_checks_from_env() {
    const char *env = std::getenv("SHARDOPT_CHECK_FINGERPRINTS");
    return env && *env && std::string(env) != "0";
}

std::uint64_t fnv_mix(std::uint64_t h, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

// The part of a collective every rank must agree on, hashed into the running fingerprint
// (the same normalization as the backends' per-call checks: split colors/keys and the op of
// ops-less collectives legitimately differ).
std::uint64_t fingerprint_step(std::uint64_t h, const Call &call) {
    h = fnv_mix(h, std::uint64_t(call.kind));
    if (call.kind == CallKind::split || call.kind == CallKind::barrier) return h;
    const bool has_op = call.kind == CallKind::allreduce || call.kind == CallKind::reduce_scatter ||
                        call.kind == CallKind::reduce;
    const bool has_root = call.kind == CallKind::broadcast || call.kind == CallKind::reduce;
    h = fnv_mix(h, call.count);
    h = fnv_mix(h, std::uint64_t(call.dtype));
    h = fnv_mix(h, std::uint64_t(call.count) * dtype_size(call.dtype));
    h = fnv_mix(h, has_op ? std::uint64_t(call.op) : 0);
    return fnv_mix(h, has_root ? std::uint64_t(std::int64_t(call.root)) : 0);
}

// Starts the trail of recent calls a diagnosable error carries ("rank 3 recent calls ...").
constexpr const char *kTrailMarker = " recent calls (oldest first):";

bool is_diagnosable(ErrorCode code) {
    return code == ErrorCode::timeout || code == ErrorCode::mismatch || code == ErrorCode::peer_lost;
}

} // namespace

Communicator::Communicator(int rank, int size)
    : rank_(rank), size_(size), timeout_(default_timeout_from_env()),
      fingerprint_checks_(fingerprint_checks_from_env()), fingerprint_(fingerprint_checks_ ? 0xcbf29ce484222325ull : 0),
      collective_queue_(std::make_unique<Queue>()), send_queue_(std::make_unique<Queue>()),
      recv_queue_(std::make_unique<Queue>()) {
    require(size >= 1, ErrorCode::invalid_argument, "communicator size must be at least 1");
    require(rank >= 0 && rank < size, ErrorCode::invalid_argument, "rank out of range");
}

Communicator::~Communicator() { shutdown_queues(); }

void Communicator::set_host_of_ranks(const std::vector<int> &host_of) {
    require(host_of.empty() || int(host_of.size()) == size_, ErrorCode::internal,
            "set_host_of_ranks: one host per rank expected");
    // Renumbered by first appearance: every rank derives the same indices from the same input.
    std::vector<int> renumbered(host_of.size());
    std::vector<std::pair<int, int>> seen; // (given index, new index)
    for (std::size_t r = 0; r < host_of.size(); ++r) {
        auto it = std::find_if(seen.begin(), seen.end(), [&](const auto &p) { return p.first == host_of[r]; });
        if (it == seen.end()) it = seen.insert(seen.end(), {host_of[r], int(seen.size())});
        renumbered[r] = it->second;
    }
    host_of_ranks_ = std::move(renumbered);
}

void Communicator::shutdown_queues() noexcept {
    if (!collective_queue_) return;
    const bool in_flight = !collective_queue_->idle() || !send_queue_->idle() || !recv_queue_->idle();
    if (in_flight) {
        try {
            abort("communicator destroyed while operations were in flight", ErrorCode::invalid_state);
        } catch (...) { // abort must not stop the destructor
        }
    }
    collective_queue_.reset();
    send_queue_.reset();
    recv_queue_.reset();
}

void Communicator::set_timeout(Duration timeout) {
    require(timeout.count() > 0, ErrorCode::invalid_argument, "timeout must be positive");
    timeout_ = timeout;
}

void Communicator::abort(const std::string &reason, ErrorCode code) {
    {
        std::lock_guard<std::mutex> lock(abort_mutex_);
        if (!abort_reason_.empty()) return;
        abort_reason_ = reason.empty() ? "aborted" : reason;
        abort_code_ = code;
        aborted_.store(true, std::memory_order_release);
    }
    on_abort(reason, code);
}

void Communicator::on_abort(const std::string &, ErrorCode) {}

std::string Communicator::abort_reason() const {
    if (!aborted_.load(std::memory_order_acquire)) return {};
    std::lock_guard<std::mutex> lock(abort_mutex_);
    return abort_reason_;
}

ErrorCode Communicator::abort_code() const {
    if (!aborted_.load(std::memory_order_acquire)) return ErrorCode::ok;
    std::lock_guard<std::mutex> lock(abort_mutex_);
    return abort_code_ == ErrorCode::ok ? ErrorCode::invalid_state : abort_code_;
}

void Communicator::validate(const Call &call) const {
    // The description is built only on failure: validation runs on every call, including
    // 8-byte allreduces that take a microsecond.
    auto check = [&](bool ok, const char *problem) {
        if (!ok) throw Error(ErrorCode::invalid_argument, describe(call) + ": " + problem);
    };
    check(is_valid(call.dtype), "invalid dtype");
    check(is_valid(call.op), "invalid reduce op");
    const bool has_data = call.count > 0;
    switch (call.kind) {
    case CallKind::allreduce:
    case CallKind::reduce_scatter:
    case CallKind::allgather: check(!has_data || (call.send && call.recv), "null buffer"); break;
    case CallKind::broadcast: check(!has_data || call.recv, "null buffer"); break;
    case CallKind::reduce:
        check(!has_data || call.send, "null send buffer");
        check(!has_data || call.root != rank_ || call.recv, "null recv buffer on root");
        break;
    case CallKind::send: check(!has_data || call.send, "null buffer"); break;
    case CallKind::recv: check(!has_data || call.recv, "null buffer"); break;
    case CallKind::barrier:
    case CallKind::split: break;
    }
    if (call.kind == CallKind::broadcast || call.kind == CallKind::reduce || call.kind == CallKind::send ||
        call.kind == CallKind::recv) {
        const char *role = (call.kind == CallKind::send || call.kind == CallKind::recv) ? "peer" : "root";
        if (call.root < 0 || call.root >= size_)
            throw Error(ErrorCode::invalid_argument, describe(call) + ": " + role + " " + std::to_string(call.root) +
                                                         " out of range for size " + std::to_string(size_));
    }
    if (call.kind == CallKind::send || call.kind == CallKind::recv) check(call.tag >= 0, "tag must be >= 0");
    // Overflow guard: count * size() * element size must fit in size_t.
    const std::size_t elem = dtype_size(call.dtype);
    check(call.count <= (std::size_t(-1) / elem) / std::size_t(size_), "count too large");
}

std::size_t Communicator::record_start(const Call &call) {
    const int stream = call.kind == CallKind::send ? 1 : call.kind == CallKind::recv ? 2 : 0;
    if (stream == 0 && fingerprint_checks_) fingerprint_ = fingerprint_step(fingerprint_, call);
    std::lock_guard<std::mutex> lock(history_mutex_);
    Call kept = call;
    kept.send = nullptr;
    kept.recv = nullptr;
    const std::size_t id = history_next_++;
    history_[id % kHistory] = HistoryEntry{stream_seq_[stream]++, kept, 0};
    return id;
}

void Communicator::record_end(std::size_t id, bool ok) {
    std::lock_guard<std::mutex> lock(history_mutex_);
    if (id + kHistory < history_next_) return; // already dropped from the ring
    history_[id % kHistory].state = ok ? 1 : 2;
}

std::string Communicator::recent_calls() const {
    std::lock_guard<std::mutex> lock(history_mutex_);
    std::ostringstream out;
    out << "rank " << rank_ << kTrailMarker;
    if (history_next_ == 0) out << " none";
    static const char *const kStates[] = {"running", "ok", "failed"};
    const std::size_t first = history_next_ > kHistory ? history_next_ - kHistory : 0;
    for (std::size_t id = first, i = 0; id < history_next_; ++id, ++i) {
        const auto &h = history_[id % kHistory];
        const char *stream = h.call.kind == CallKind::send ? "send " : h.call.kind == CallKind::recv ? "recv " : "";
        out << (i ? "; " : " ") << stream << "#" << h.seq << " " << describe(h.call) << " " << kStates[h.state];
    }
    return out.str();
}

void Communicator::guarded(const Call &call, const std::function<void()> &body) {
    if (aborted_.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(abort_mutex_);
        if (!abort_reason_.empty())
            throw Error(abort_code_ == ErrorCode::ok ? ErrorCode::invalid_state : abort_code_,
                        describe(call) + " on an aborted communicator: " + abort_reason_);
    }
    const std::size_t id = record_start(call);
    try {
        body();
    } catch (const Error &e) {
        record_end(id, false);
        if (e.code() == ErrorCode::invalid_argument) throw;
        // A collective that failed half way leaves peers in an unknown state: poison the group.
        // Peers get the reason as it is; this rank's own report also lists where it was.
        abort(e.what(), e.code());
        // One trail per error: a communicator wrapping another (staged over UCX, a test
        // adapter over staged) sees the inner one's error with its trail already attached.
        if (!is_diagnosable(e.code()) || std::strstr(e.what(), kTrailMarker)) throw;
        throw Error(e.code(), std::string(e.what()) + " [" + recent_calls() + "]");
    } catch (...) {
        record_end(id, false);
        throw;
    }
    record_end(id, true);
}

namespace {
// The issue capture of the call this thread is running (a queue thread runs one at a time).
thread_local const std::shared_ptr<void> *current_capture = nullptr;

// Nested: a wrapping communicator's run() issues its inner communicator's call on the same
// thread (run_in_order may run it inline), and its own capture must be back after that.
struct CaptureScope {
    const std::shared_ptr<void> *outer;
    explicit CaptureScope(const std::shared_ptr<void> &capture) : outer(current_capture) { current_capture = &capture; }
    ~CaptureScope() { current_capture = outer; }
};
} // namespace

std::shared_ptr<void> Communicator::capture_at_issue(const Call &) { return nullptr; }

const std::shared_ptr<void> &Communicator::issue_capture() noexcept {
    static const std::shared_ptr<void> none;
    return current_capture ? *current_capture : none;
}

void Communicator::run_blocking(const Call &call) {
    validate(call);
    struct Issued {
        Communicator *self;
        const Call *call;
        std::shared_ptr<void> capture;
    } issued{this, &call, capture_at_issue(call)};
    // One pointer: fits std::function's inline storage (no allocation), and the caller waits
    // for the job whichever thread runs it.
    queue_for(call.kind).run_in_order([&issued] {
        CaptureScope scope(issued.capture);
        issued.self->guarded(*issued.call, [&issued] { issued.self->run(*issued.call); });
    });
}

WorkPtr Communicator::run_async(const Call &call) {
    validate(call);
    return queue_for(call.kind).enqueue([this, call, capture = capture_at_issue(call)] {
        CaptureScope scope(capture);
        guarded(call, [&] { run(call); });
    });
}

Communicator::Queue &Communicator::queue_for(CallKind kind) {
    if (kind == CallKind::send) return *send_queue_;
    if (kind == CallKind::recv) return *recv_queue_;
    return *collective_queue_;
}

static Call make_call(CallKind kind, const void *send, void *recv, std::size_t count, DType dtype,
                      ReduceOp op = ReduceOp::sum, int root = 0, int tag = 0) {
    Call call;
    call.kind = kind;
    call.send = send;
    call.recv = recv;
    call.count = count;
    call.dtype = dtype;
    call.op = op;
    call.root = root;
    call.tag = tag;
    return call;
}

void Communicator::allreduce(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op) {
    run_blocking(make_call(CallKind::allreduce, send, recv, count, dtype, op));
}
void Communicator::reduce_scatter(const void *send, void *recv, std::size_t recv_count, DType dtype, ReduceOp op) {
    run_blocking(make_call(CallKind::reduce_scatter, send, recv, recv_count, dtype, op));
}
void Communicator::allgather(const void *send, void *recv, std::size_t send_count, DType dtype) {
    run_blocking(make_call(CallKind::allgather, send, recv, send_count, dtype));
}
void Communicator::broadcast(void *buffer, std::size_t count, DType dtype, int root) {
    run_blocking(make_call(CallKind::broadcast, buffer, buffer, count, dtype, ReduceOp::sum, root));
}
void Communicator::reduce(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op, int root) {
    run_blocking(make_call(CallKind::reduce, send, recv, count, dtype, op, root));
}
void Communicator::barrier() { run_blocking(make_call(CallKind::barrier, nullptr, nullptr, 0, DType::u8)); }
void Communicator::send(const void *buffer, std::size_t count, DType dtype, int peer, int tag) {
    run_blocking(make_call(CallKind::send, buffer, nullptr, count, dtype, ReduceOp::sum, peer, tag));
}
void Communicator::recv(void *buffer, std::size_t count, DType dtype, int peer, int tag) {
    run_blocking(make_call(CallKind::recv, nullptr, buffer, count, dtype, ReduceOp::sum, peer, tag));
}

WorkPtr Communicator::allreduce_async(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op) {
    return run_async(make_call(CallKind::allreduce, send, recv, count, dtype, op));
}
WorkPtr Communicator::reduce_scatter_async(const void *send, void *recv, std::size_t recv_count, DType dtype,
                                           ReduceOp op) {
    return run_async(make_call(CallKind::reduce_scatter, send, recv, recv_count, dtype, op));
}
WorkPtr Communicator::allgather_async(const void *send, void *recv, std::size_t send_count, DType dtype) {
    return run_async(make_call(CallKind::allgather, send, recv, send_count, dtype));
}
WorkPtr Communicator::broadcast_async(void *buffer, std::size_t count, DType dtype, int root) {
    return run_async(make_call(CallKind::broadcast, buffer, buffer, count, dtype, ReduceOp::sum, root));
}
WorkPtr Communicator::reduce_async(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op,
                                   int root) {
    return run_async(make_call(CallKind::reduce, send, recv, count, dtype, op, root));
}
WorkPtr Communicator::barrier_async() { return run_async(make_call(CallKind::barrier, nullptr, nullptr, 0, DType::u8)); }
WorkPtr Communicator::send_async(const void *buffer, std::size_t count, DType dtype, int peer, int tag) {
    return run_async(make_call(CallKind::send, buffer, nullptr, count, dtype, ReduceOp::sum, peer, tag));
}
WorkPtr Communicator::recv_async(void *buffer, std::size_t count, DType dtype, int peer, int tag) {
    return run_async(make_call(CallKind::recv, nullptr, buffer, count, dtype, ReduceOp::sum, peer, tag));
}

CommunicatorPtr Communicator::split(int color, int key) {
    Call call = make_call(CallKind::split, nullptr, nullptr, 0, DType::u8, ReduceOp::sum, color, key);
    validate(call);
    CommunicatorPtr child;
    collective_queue_->run_in_order([&] { guarded(call, [&] { child = run_split(color, key); }); });
    if (child) child->set_timeout(timeout_);
    return child;
}

} // namespace shardopt
