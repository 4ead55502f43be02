#include "ucx_worker.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "shardopt/error.hpp"

namespace shardopt::ucx {
namespace {

void check(ucs_status_t status, const char *what) {
    if (status != UCS_OK)
        throw Error(ErrorCode::internal, std::string("ucx: ") + what + " failed: " + ucs_status_string(status));
}

// Without peer error handling, UCX 1.13 treats a failed single-copy transfer as fatal and aborts
// the process: a survivor reading (cma get) from a rank that was just killed would die with it.
// That failure is exactly "the peer process is gone" (process_vm_readv/writev: ESRCH), which the
// liveness channel reports as peer_lost, so this log handler, ahead of UCX's default one, turns
// that one message into an error line instead of an abort; the transfer then completes with an
// error status (check_result reports it as peer_lost too). The same for a fetch from a buffer the
// sender abandoned and freed (EFAULT), which only happens after a failed collective. Everything
// else is left to UCX.
ucs_log_func_rc_t dead_peer_copy_is_not_fatal(const char *file, unsigned, const char *, ucs_log_level_t level,
                                              const ucs_log_component_config_t *, const char *format,
                                              va_list ap) {
    if (level != UCS_LOG_LEVEL_FATAL || !file || !std::strstr(file, "cma_ep.c")) return UCS_LOG_FUNC_RC_CONTINUE;
    char text[512];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(text, sizeof text, format, copy);
    va_end(copy);
    if (std::strstr(text, std::strerror(ESRCH))) {
        std::fprintf(stderr, "shardopt: ucx: %s (peer process gone; reported as peer_lost)\n", text);
        return UCS_LOG_FUNC_RC_STOP;
    }
    // EFAULT: the sender released a large message it had abandoned (its collective failed and
    // it freed the buffer) before this side fetched it. Only ever a leftover of a failed call.
    if (std::strstr(text, std::strerror(EFAULT))) return UCS_LOG_FUNC_RC_STOP;
    return UCS_LOG_FUNC_RC_CONTINUE;
}

void install_log_handler_once() {
    static std::once_flag once;
    std::call_once(once, [] { ucs_log_push_handler(&dead_peer_copy_is_not_fatal); });
}

} // namespace

Worker::Worker(int world_rank, int world_size, std::chrono::milliseconds keepalive)
    : world_rank_(world_rank), world_size_(world_size), lost_(new std::atomic<bool>[std::size_t(world_size)]),
      lost_reasons_(std::size_t(world_size)), crashed_(std::size_t(world_size), false) {
    for (int r = 0; r < world_size; ++r) lost_[r].store(false);
    if (const char *v = std::getenv("SHARDOPT_UCX_PEER_ERRORS")) peer_errors_ = v[0] == '1' || v[0] == 'y';
    if (!peer_errors_) install_log_handler_once();
    ucp_config_t *config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    if (peer_errors_ && !std::getenv("UCX_KEEPALIVE_INTERVAL")) {
        const auto ms = std::clamp<long long>(keepalive.count(), 100, 20000);
        ucp_config_modify(config, "KEEPALIVE_INTERVAL", (std::to_string(ms) + "ms").c_str());
    }
    // Note: UCX 1.13 leaves shared memory (sysv/posix, cma) out of endpoints with peer error
    // handling; without it (the default here) local ranks get shm for small messages and cma
    // (single-copy) rendezvous for large ones.
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.estimated_num_eps = std::size_t(world_size);
    ucs_status_t status = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    check(status, "ucp_init");

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    status = ucp_worker_create(context_, &wparams, &worker_);
    if (status != UCS_OK) {
        ucp_cleanup(context_);
        check(status, "ucp_worker_create");
    }
    if (ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;

    ucp_address_t *addr = nullptr;
    std::size_t len = 0;
    status = ucp_worker_get_address(worker_, &addr, &len);
    if (status != UCS_OK) {
        ucp_worker_destroy(worker_);
        ucp_cleanup(context_);
        check(status, "ucp_worker_get_address");
    }
    address_.assign(reinterpret_cast<std::uint8_t *>(addr), reinterpret_cast<std::uint8_t *>(addr) + len);
    ucp_worker_release_address(worker_, addr);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); // -1: the event fd's sleeper sleeps out its span
}

Worker::~Worker() {
    // Deliver buffered sends and flush endpoints, but never wait long on a peer that is gone or
    // will not receive (an aborted job): then endpoints are closed forcibly (peer error
    // handling) or the worker is left to process exit (without it).
    for (int r = 0; r < world_size_; ++r)
        if (lost_[r].load() && (peer_errors_ || crashed_[r] || abandoned_sends_ > 0)) {
            // UCX 1.13 can assert while tearing down endpoints to a dead peer over tcp
            // (tcp_ep.c PUT ack, ucp_ep.c proto_reqs), and without peer error handling nothing
            // to a dead peer ever completes. After a lost peer the job is over anyway: leave
            // the worker to process exit rather than risk a hang or an abort in a destructor.
            // (A peer that left cleanly is the same when sends to it were abandoned: they stay
            // inside UCX forever.)
            if (liveness_) liveness_->goodbye();
            return;
        }
    const auto start = Clock::now();
    const auto flush_deadline = start + std::chrono::seconds(1);
    const auto deadline = start + std::chrono::seconds(3);
    std::unique_lock<std::mutex> lock(mutex_);
    bool clean = true;
    ucp_request_param_t fp{};
    void *flush = ucp_worker_flush_nbx(worker_, &fp);
    while (UCS_PTR_IS_PTR(flush) && ucp_request_check_status(flush) == UCS_INPROGRESS &&
           Clock::now() < flush_deadline)
        ucp_worker_progress(worker_);
    if (UCS_PTR_IS_PTR(flush)) {
        clean = ucp_request_check_status(flush) != UCS_INPROGRESS;
        ucp_request_free(flush);
    } else if (UCS_PTR_STATUS(flush) != UCS_OK) {
        clean = false;
    }
    progress_locked();
    if (!detached_.empty()) clean = false;
    for (auto &d : detached_) ucp_request_free(d.handle); // completed with CANCELED by the force close
    // Discard messages nobody will receive (leftovers of aborted communicators), so UCX does
    // not warn about each of them.
    std::vector<std::uint8_t> sink;
    for (int i = 0; i < 100000 && Clock::now() < deadline; ++i) {
        ucp_worker_progress(worker_);
        ucp_tag_recv_info_t info{};
        ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, 0, 0, 1, &info);
        if (!msg) break;
        sink.resize(std::max<std::size_t>(info.length, 1));
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        p.datatype = ucp_dt_make_contig(1);
        void *req = ucp_tag_msg_recv_nbx(worker_, sink.data(), info.length, msg, &p);
        while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline)
            ucp_worker_progress(worker_);
        if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
    }
    // Everything this rank sent has been delivered (or never will be): tell the job it leaves.
    if (liveness_) liveness_->goodbye();
    std::vector<void *> closing;
    for (int r = 0; r < int(eps_.size()); ++r) {
        if (!eps_[r]) continue;
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        // A forced close needs peer error handling on both sides (ucp.h); without it, close
        // by flushing (local for shm/cma) and leave the worker alone if that does not finish.
        p.flags = peer_errors_ && (!clean || lost_[r].load()) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        void *req = ucp_ep_close_nbx(eps_[r], &p);
        if (UCS_PTR_IS_PTR(req)) closing.push_back(req);
    }
    while (!closing.empty() && Clock::now() < deadline) {
        ucp_worker_progress(worker_);
        closing.erase(std::remove_if(closing.begin(), closing.end(),
                                     [](void *req) {
                                         if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
                                         ucp_request_free(req);
                                         return true;
                                     }),
                      closing.end());
    }
    if (!closing.empty() && !peer_errors_) return; // stuck flushing: leave it to process exit
    for (void *req : closing) ucp_request_free(req);
    detached_.clear();
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    if (wake_fd_ >= 0) close(wake_fd_);
}

void Worker::on_ep_error(void *arg, ucp_ep_h, ucs_status_t status) {
    auto *a = static_cast<EpArg *>(arg);
    // Called from ucp_worker_progress, i.e. with mutex_ held.
    a->worker->mark_lost_locked(a->rank, ucs_status_string(status), true);
}

void Worker::mark_lost_locked(int world_peer, const std::string &reason, bool crashed) {
    if (world_peer < 0 || world_peer >= world_size_ || world_peer == world_rank_) return;
    if (lost_[world_peer].load(std::memory_order_relaxed)) return;
    lost_reasons_[world_peer] = reason;
    crashed_[world_peer] = crashed;
    lost_[world_peer].store(true, std::memory_order_release);
}

void Worker::attach_liveness(std::unique_ptr<bootstrap::Liveness> liveness) {
    std::lock_guard<std::mutex> lock(mutex_);
    liveness_ = std::move(liveness);
    poll_liveness_locked();
}

void Worker::poll_liveness_locked() {
    if (!liveness_) return;
    for (const auto &e : liveness_->poll()) mark_lost_locked(e.rank, e.reason, !e.left);
}

std::string Worker::lost_reason(int world_peer) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lost_reasons_[world_peer];
}

void Worker::connect(const std::vector<std::vector<std::uint8_t>> &addresses) {
    std::lock_guard<std::mutex> lock(mutex_);
    eps_.assign(addresses.size(), nullptr);
    ep_args_.resize(addresses.size());
    for (int r = 0; r < int(addresses.size()); ++r) {
        ep_args_[r] = std::make_unique<EpArg>(EpArg{this, r});
        ucp_ep_params_t p{};
        p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
        p.address = reinterpret_cast<const ucp_address_t *>(addresses[r].data());
        p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        if (peer_errors_) {
            p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
            p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
            p.err_handler.cb = &Worker::on_ep_error;
            p.err_handler.arg = ep_args_[r].get();
        }
        check(ucp_ep_create(worker_, &p, &eps_[r]), ("ucp_ep_create to rank " + std::to_string(r)).c_str());
    }
}

ucp_ep_h Worker::ep_for(int world_peer) {
    if (world_peer < 0 || world_peer >= int(eps_.size()) || !eps_[world_peer])
        throw Error(ErrorCode::internal, "ucx: no endpoint for world rank " + std::to_string(world_peer));
    return eps_[world_peer];
}

namespace {

// Clears r for a new post, keeping whom it is with (the caller's diagnostics fields).
void start_post(Request &r, std::size_t bytes, bool is_recv) {
    const int peer = r.peer, known_world_peer = r.world_peer;
    r = Request{};
    r.peer = peer;
    r.world_peer = known_world_peer;
    r.posted = true;
    r.is_recv = is_recv;
    r.expected = bytes;
}

// Records what ucp_tag_*_nbx returned: a request in flight, or an immediate status.
void finish_post(Request &r, void *req) {
    if (UCS_PTR_IS_PTR(req)) {
        r.handle = req;
    } else {
        r.done = true;
        r.status = UCS_PTR_STATUS(req);
    }
}

} // namespace

void Worker::post_send(Request &r, int world_peer, std::uint64_t tag, const void *buf, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    start_post(r, bytes, false);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(1);
    finish_post(r, ucp_tag_send_nbx(ep_for(world_peer), buf, bytes, tag, &p));
}

void Worker::post_recv(Request &r, std::uint64_t tag, std::uint64_t mask, void *buf, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    start_post(r, bytes, true);
    ucp_request_param_t p{};
    // Always get a request: UCX 1.13 does not fill recv_info on immediate completion, and
    // the received length is how a size mismatch is detected.
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.datatype = ucp_dt_make_contig(1);
    finish_post(r, ucp_tag_recv_nbx(worker_, buf, bytes, tag, mask, &p));
}

void Worker::send_buffered(int world_peer, std::uint64_t tag, const void *buf, std::size_t bytes) {
    // Send from a private copy: when UCX completes in place (eager) the copy is dropped at once,
    // otherwise it lives until the send completes, so the caller may reuse its buffer now.
    Detached d{nullptr, std::vector<std::uint8_t>(static_cast<const std::uint8_t *>(buf),
                                                  static_cast<const std::uint8_t *>(buf) + bytes)};
    std::lock_guard<std::mutex> lock(mutex_);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(1);
    void *req = ucp_tag_send_nbx(ep_for(world_peer), d.data.data(), bytes, tag, &p);
    if (UCS_PTR_IS_PTR(req)) {
        d.handle = req;
        detached_.push_back(std::move(d));
    }
}

void Worker::cancel(Request &r) {
    Request *one = &r;
    cancel_all(&one, 1);
}

void Worker::cancel_all(Request *const *reqs, std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    bool any = false;
    for (std::size_t i = 0; i < n; ++i) {
        Request &r = *reqs[i];
        if (!r.posted || r.done || !r.handle) continue;
        if (ucp_request_check_status(r.handle) == UCS_INPROGRESS) ucp_request_cancel(worker_, r.handle);
        any = true;
    }
    // A receive already matched (rendezvous data on its way) cannot be cancelled: it completes
    // when the data has landed. Wait for that (bounded), so no buffer is written after return.
    // From a peer known to be gone, only what already arrived can still land: drain briefly.
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::seconds(2), lost_deadline = start + std::chrono::milliseconds(100);
    while (any) {
        any = false;
        bool only_lost = true;
        for (std::size_t i = 0; i < n; ++i) {
            Request &r = *reqs[i];
            if (r.posted && !r.done && r.handle && r.is_recv && ucp_request_check_status(r.handle) == UCS_INPROGRESS) {
                any = true;
                if (r.world_peer < 0 || !lost_[r.world_peer].load(std::memory_order_acquire)) only_lost = false;
            }
        }
        const auto now = Clock::now();
        if (!any || now >= deadline || (only_lost && now >= lost_deadline)) break;
        progress_locked();
    }
    for (std::size_t i = 0; i < n; ++i) {
        Request &r = *reqs[i];
        if (!r.posted || r.done) continue;
        if (r.handle) {
            ucp_request_free(r.handle); // UCX releases it once it really completes
            if (!r.is_recv) ++abandoned_sends_;
        }
        r.handle = nullptr;
        r.done = true;
        r.status = UCS_ERR_CANCELED;
    }
}

bool Worker::test_locked(Request &r) {
    if (r.done) return true;
    if (!r.handle) return false;
    ucs_status_t st;
    if (r.is_recv) {
        st = ucp_tag_recv_request_test(r.handle, &r.info);
        if (st == UCS_INPROGRESS) return false;
        r.received = r.info.length;
    } else {
        st = ucp_request_check_status(r.handle);
        if (st == UCS_INPROGRESS) return false;
    }
    r.status = st;
    r.done = true;
    ucp_request_free(r.handle);
    r.handle = nullptr;
    return true;
}

void Worker::progress_locked() {
    unsigned progressed = 0;
    for (int i = 0; i < 64; ++i) {
        const unsigned n = ucp_worker_progress(worker_);
        if (n == 0) break;
        progressed += n;
    }
    poll_liveness_locked();
    for (auto it = detached_.begin(); it != detached_.end();) {
        if (ucp_request_check_status(it->handle) != UCS_INPROGRESS) {
            ucp_request_free(it->handle);
            it = detached_.erase(it);
        } else {
            ++it;
        }
    }
    if (progressed > 0) note_progress();
}

void Worker::note_progress() {
    // What this thread progressed may be another thread's request: the threads idling (see
    // idle_wait) must look. The epoch moves under the mutex their waits check it under.
    bool cv_sleepers, efd_sleeper;
    {
        std::lock_guard<std::mutex> lock(sleep_mutex_);
        progress_epoch_.fetch_add(1, std::memory_order_release);
        cv_sleepers = progress_sleepers_ > 0;
        efd_sleeper = efd_sleeper_;
    }
    if (cv_sleepers) progress_cv_.notify_all();
    if (efd_sleeper && wake_fd_ >= 0) {
        const std::uint64_t one = 1;
        if (write(wake_fd_, &one, sizeof one) < 0) { // full counter: it is readable anyway
        }
    }
}

void Worker::idle_wait(Clock::time_point until, std::uint64_t epoch) {
    const auto now = Clock::now();
    if (until <= now) return;
    auto span = std::min<Clock::duration>(until - now, std::chrono::milliseconds(2));
    if (efd_ < 0) {
        std::this_thread::sleep_for(std::min<Clock::duration>(span, std::chrono::microseconds(50)));
        return;
    }
    // One thread at a time sleeps on UCX's event fd (and this worker's wake fd); the others on a
    // condition variable. An event consumed by another thread's progress never wakes a thread
    // asleep on the event fd, so whoever progresses wakes the sleepers (note_progress), and nobody
    // sleeps once anything progressed since it last looked (`epoch`).
    {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        if (progress_epoch_.load(std::memory_order_acquire) != epoch) return;
        if (efd_sleeper_) {
            ++progress_sleepers_;
            progress_cv_.wait_for(lock, span, [&] {
                return progress_epoch_.load(std::memory_order_acquire) != epoch || !efd_sleeper_;
            });
            --progress_sleepers_;
            return;
        }
        efd_sleeper_ = true;
    }
    struct LeaveEventFd {
        Worker &w;
        ~LeaveEventFd() {
            {
                std::lock_guard<std::mutex> lock(w.sleep_mutex_);
                w.efd_sleeper_ = false;
            }
            w.progress_cv_.notify_all(); // one of the others may take over the event fd
        }
    } leave{*this};
    ucs_status_t st;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        st = ucp_worker_arm(worker_);
    }
    if (st == UCS_ERR_BUSY) return; // events pending: go progress
    if (st != UCS_OK) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        return;
    }
    // Progress made since the caller looked, before this thread became the sleeper, found no
    // sleeper to wake: look again instead.
    if (progress_epoch_.load(std::memory_order_acquire) != epoch) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(span).count();
    timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
    pollfd p[2] = {{efd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ppoll(p, wake_fd_ >= 0 ? 2 : 1, &ts, nullptr);
    if (wake_fd_ >= 0 && (p[1].revents & POLLIN)) {
        std::uint64_t count;
        if (read(wake_fd_, &count, sizeof count) < 0) { // drained by nobody else: nothing to do
        }
    }
}

std::uint32_t Worker::propose_context() {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_context_++;
}

void Worker::commit_context(std::uint32_t agreed) {
    std::lock_guard<std::mutex> lock(mutex_);
    next_context_ = std::max(next_context_, agreed + 1);
}

} // namespace shardopt::ucx
