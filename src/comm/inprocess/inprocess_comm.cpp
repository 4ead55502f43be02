// In-process communicator: each collective is one slot of the shared InProcessGroup. Rank r
// reduces chunk r of the result into the slot's scratch (reading every rank's buffer in rank
// order), all ranks wait, then each copies the whole result out. Reading peers' memory
// directly means one pass over the data and no intermediate copies per peer.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "../reduction.hpp"
#include "inprocess_group.hpp"
#include "shardopt/inprocess.hpp"

namespace shardopt {
namespace {

// The part of a call that must agree across ranks (split: only the kind).
std::string signature(const Call &call) {
    if (call.kind == CallKind::split) return "split";
    Call c = call;
    if (c.kind == CallKind::allgather || c.kind == CallKind::barrier) c.op = ReduceOp::sum;
    return describe(c);
}

std::string mismatch_report(std::uint64_t seq, const std::vector<Call> &calls,
                            const std::vector<std::uint64_t> &fingerprints) {
    std::map<std::string, std::vector<int>> by_signature;
    std::vector<std::string> order;
    for (int r = 0; r < int(calls.size()); ++r) {
        auto sig = signature(calls[r]);
        if (!by_signature.count(sig)) order.push_back(sig);
        by_signature[sig].push_back(r);
    }
    if (order.size() == 1) {
        // SHARDOPT_CHECK_FINGERPRINTS: the same call now, but a different history before it.
        std::map<std::uint64_t, std::vector<int>> by_fp;
        for (int r = 0; r < int(fingerprints.size()); ++r)
            if (fingerprints[r]) by_fp[fingerprints[r]].push_back(r);
        if (by_fp.size() <= 1) return {};
        std::string text = "collective history fingerprint mismatch at collective #" + std::to_string(seq) +
                           " (" + order[0] + " on every rank, but earlier calls differed):";
        char hex[32];
        for (const auto &[fp, ranks] : by_fp) {
            std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fp));
            text += std::string(" ranks");
            for (std::size_t k = 0; k < ranks.size(); ++k) text += (k ? "," : " ") + std::to_string(ranks[k]);
            text += std::string(" have ") + hex + ";";
        }
        text.pop_back();
        return text;
    }
    std::string text = "collective mismatch across ranks at collective #" + std::to_string(seq) + ": ";
    for (std::size_t i = 0; i < order.size(); ++i) {
        const auto &ranks = by_signature[order[i]];
        text += (i ? "; " : "") + std::string(ranks.size() > 1 ? "ranks " : "rank ");
        for (std::size_t k = 0; k < ranks.size(); ++k) text += (k ? "," : "") + std::to_string(ranks[k]);
        text += " called " + order[i];
    }
    return text;
}

class InProcessComm final : public Communicator {
  public:
    InProcessComm(int rank, std::shared_ptr<InProcessGroup> group, const std::vector<int> &host_of)
        : Communicator(rank, group->size()), group_(std::move(group)) {
        set_host_of_ranks(host_of);
    }
    ~InProcessComm() override {
        shutdown_queues(); // before group_ goes
        group_->depart(rank());
    }

    std::string backend_name() const override { return "inprocess"; }

  protected:
    void on_abort(const std::string &reason, ErrorCode code) override { group_->abort(reason, code); }

    void run(const Call &call) override {
        const auto deadline = InProcessGroup::Clock::now() + timeout();
        if (call.kind == CallKind::send) {
            group_->post_message(rank(), call.root, call.tag, call);
            count_sent(call.count * dtype_size(call.dtype));
            return;
        }
        if (call.kind == CallKind::recv) {
            group_->take_message(call.root, rank(), call.tag, call, deadline);
            return;
        }
        const std::uint64_t seq = next_seq_++;
        auto &slot = group_->arrive(seq, rank(), call, scratch_bytes(call), deadline, history_fingerprint());
        SlotExit exit{*group_, seq, slot};
        check_agreement(seq, slot);
        switch (call.kind) {
        case CallKind::allreduce: return run_reduction(seq, slot, deadline, call, true);
        case CallKind::reduce: return run_reduction(seq, slot, deadline, call, rank() == call.root);
        case CallKind::reduce_scatter: return run_reduce_scatter(seq, slot, deadline, call);
        case CallKind::allgather: return run_allgather(seq, slot, deadline, call);
        case CallKind::broadcast: return run_broadcast(seq, slot, deadline, call);
        case CallKind::barrier: return;
        default: throw Error(ErrorCode::internal, "inprocess: unexpected call kind");
        }
    }

    CommunicatorPtr run_split(int color, int key) override {
        Call call;
        call.kind = CallKind::split;
        call.root = color;
        call.tag = key;
        const auto deadline = InProcessGroup::Clock::now() + timeout();
        const std::uint64_t seq = next_seq_++;
        auto &slot = group_->arrive(seq, rank(), call, 0, deadline, history_fingerprint());
        SlotExit exit{*group_, seq, slot};
        check_agreement(seq, slot);
        if (color < 0) {
            group_->finish_and_wait(seq, slot, deadline);
            return nullptr;
        }
        // Members of my color ordered by (key, parent rank).
        std::vector<std::pair<int, int>> members;
        for (int r = 0; r < size(); ++r)
            if (slot.calls[r].root == color) members.emplace_back(slot.calls[r].tag, r);
        std::sort(members.begin(), members.end());
        int child_rank = 0;
        while (members[child_rank].second != rank()) ++child_rank;
        auto child = group_->child_group(slot, color, int(members.size()));
        // Everyone must have taken its child group before the slot (which holds them) is freed.
        group_->finish_and_wait(seq, slot, deadline);
        std::vector<int> child_hosts;
        for (const auto &m : members) child_hosts.push_back(host_of_ranks()[std::size_t(m.second)]);
        return std::make_shared<InProcessComm>(child_rank, child, child_hosts);
    }

  private:
    using Deadline = InProcessGroup::Clock::time_point;

    void check_agreement(std::uint64_t seq, InProcessGroup::Slot &slot) {
        std::string report = mismatch_report(seq, slot.calls, slot.fingerprints);
        if (!report.empty()) {
            group_->abort(report, ErrorCode::mismatch);
            throw Error(ErrorCode::mismatch, report);
        }
    }

    std::vector<const void *> inputs(const InProcessGroup::Slot &slot, std::size_t offset_elems) const {
        const std::size_t elem = dtype_size(slot.calls[0].dtype);
        std::vector<const void *> ptrs(size());
        for (int r = 0; r < size(); ++r)
            ptrs[r] = static_cast<const unsigned char *>(slot.calls[r].send) + offset_elems * elem;
        return ptrs;
    }

    // Chunk of [0, count) that this rank reduces.
    std::pair<std::size_t, std::size_t> my_chunk(std::size_t count) const {
        const std::size_t per = (count + size() - 1) / size();
        const std::size_t begin = std::min(count, per * rank());
        return {begin, std::min(count, begin + per)};
    }

    // Reduces elements [begin, end) of every rank's send (offset by `source_offset`) into
    // scratch at the same positions.
    void reduce_range(InProcessGroup::Slot &slot, const Call &call, std::size_t source_offset, std::size_t begin,
                      std::size_t end) {
        if (begin >= end) return;
        const std::size_t elem = dtype_size(call.dtype);
        auto ptrs = inputs(slot, source_offset + begin);
        reduce_inputs(ptrs.data(), size(), slot.scratch.data() + begin * elem, end - begin, call.dtype, call.op);
    }

    void run_reduction(std::uint64_t seq, InProcessGroup::Slot &slot, Deadline deadline, const Call &call, bool copy_out) {
        auto [begin, end] = my_chunk(call.count);
        reduce_range(slot, call, 0, begin, end);
        const std::size_t elem = dtype_size(call.dtype);
        // Read from the others: their part of my chunk, then the chunks they reduced.
        count_sent(std::size_t(size() - 1) * (end - begin) * elem + (copy_out ? (call.count - (end - begin)) * elem : 0));
        group_->finish_and_wait(seq, slot, deadline);
        if (copy_out && call.count) std::memcpy(call.recv, slot.scratch.data(), call.count * elem);
    }

    void run_reduce_scatter(std::uint64_t seq, InProcessGroup::Slot &slot, Deadline deadline, const Call &call) {
        // Scratch holds only my output; sends are read in place, so wait before anyone returns.
        const std::size_t elem = dtype_size(call.dtype);
        if (call.count) {
            auto ptrs = inputs(slot, std::size_t(rank()) * call.count);
            unsigned char *mine = slot.scratch.data() + std::size_t(rank()) * call.count * elem;
            reduce_inputs(ptrs.data(), size(), mine, call.count, call.dtype, call.op);
            count_sent(std::size_t(size() - 1) * call.count * elem);
        }
        group_->finish_and_wait(seq, slot, deadline);
        if (call.count)
            std::memcpy(call.recv, slot.scratch.data() + std::size_t(rank()) * call.count * elem, call.count * elem);
    }

    void run_allgather(std::uint64_t seq, InProcessGroup::Slot &slot, Deadline deadline, const Call &call) {
        const std::size_t bytes = call.count * dtype_size(call.dtype);
        if (bytes) {
            // Each segment is copied from its owner's send. In place (send == recv + rank*count)
            // the own segment is already there: writing it would race with peers reading it.
            auto *out = static_cast<unsigned char *>(call.recv);
            for (int r = 0; r < size(); ++r)
                if (out + r * bytes != slot.calls[r].send) std::memcpy(out + r * bytes, slot.calls[r].send, bytes);
            count_sent(std::size_t(size() - 1) * bytes);
        }
        group_->finish_and_wait(seq, slot, deadline);
    }

    void run_broadcast(std::uint64_t seq, InProcessGroup::Slot &slot, Deadline deadline, const Call &call) {
        const std::size_t bytes = call.count * dtype_size(call.dtype);
        if (bytes && rank() != call.root) {
            std::memcpy(call.recv, slot.calls[call.root].send, bytes);
            count_sent(bytes);
        }
        group_->finish_and_wait(seq, slot, deadline);
    }

    std::size_t scratch_bytes(const Call &call) const {
        const std::size_t elem = dtype_size(call.dtype);
        switch (call.kind) {
        case CallKind::allreduce:
        case CallKind::reduce: return call.count * elem;
        case CallKind::reduce_scatter: return call.count * elem * std::size_t(size());
        default: return 0;
        }
    }

    // Leaves the slot however the collective ends, so the last rank out frees it.
    struct SlotExit {
        InProcessGroup &group;
        std::uint64_t seq;
        InProcessGroup::Slot &slot;
        ~SlotExit() { group.leave(seq, slot); }
    };

    std::shared_ptr<InProcessGroup> group_;
    std::uint64_t next_seq_ = 0;
    
};

} // namespace

std::vector<CommunicatorPtr> make_inprocess_group(int size, const std::vector<int> &host_of_ranks) {
    require(size >= 1, ErrorCode::invalid_argument, "in-process group size must be at least 1");
    require(host_of_ranks.empty() || int(host_of_ranks.size()) == size, ErrorCode::invalid_argument,
            "host_of_ranks names " + std::to_string(host_of_ranks.size()) + " hosts for " + std::to_string(size) + " ranks");
    const std::vector<int> host_of = host_of_ranks.empty() ? std::vector<int>(std::size_t(size), 0) : host_of_ranks;
    auto group = std::make_shared<InProcessGroup>(size);
    std::vector<CommunicatorPtr> comms;
    comms.reserve(size);
    for (int r = 0; r < size; ++r) comms.push_back(std::make_shared<InProcessComm>(r, group, host_of));
    return comms;
}

void run_on_ranks(const std::vector<CommunicatorPtr> &comms, const std::function<void(Communicator &)> &fn) {
    const int n = int(comms.size());
    std::vector<std::exception_ptr> errors(n);
    std::vector<bool> failed_first(n, false);
    std::mutex first_mutex;
    bool any_failed = false;
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
            try {
                fn(*comms[r]);
            } catch (...) {
                errors[r] = std::current_exception();
                {
                    std::lock_guard<std::mutex> lock(first_mutex);
                    if (!any_failed) failed_first[r] = true;
                    any_failed = true;
                }
                std::string what = "unknown error";
                try {
                    throw;
                } catch (const std::exception &e) {
                    what = e.what();
                } catch (...) {
                }
                comms[r]->abort("rank " + std::to_string(r) + " failed: " + what);
            }
        });
    }
    for (auto &t : threads) t.join();
    for (int r = 0; r < n; ++r)
        if (failed_first[r]) std::rethrow_exception(errors[r]);
}

void run_inprocess(int size, const std::function<void(Communicator &)> &fn) {
    run_on_ranks(make_inprocess_group(size), fn);
}

} // namespace shardopt
