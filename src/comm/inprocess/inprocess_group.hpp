// InProcessGroup: the state the ranks of one in-process communicator share. Each collective
// is a numbered slot where every rank posts its Call; once all have arrived, each rank reads
// the others' buffers directly. Slots are freed when the last rank leaves.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/error.hpp"

namespace shardopt {

class InProcessGroup {
  public:
    using Clock = std::chrono::steady_clock;

    struct Slot {
        explicit Slot(int size) : calls(size), fingerprints(size, 0), arrived(size, false) {}
        std::vector<Call> calls;
        std::vector<std::uint64_t> fingerprints; // history fingerprints (0: checks off)
        std::vector<bool> arrived;
        int arrived_count = 0;
        int finished_count = 0; // ranks done reading peers' buffers
        int left_count = 0;     // ranks gone; the last one frees the slot
        std::vector<unsigned char> scratch;
        std::map<int, std::shared_ptr<InProcessGroup>> split_groups;
    };

    explicit InProcessGroup(int size) : size_(size), departed_(std::size_t(size), false) {}
    int size() const { return size_; }

    // Posts rank's call for collective `seq` and waits for every rank; returns the slot with all
    // calls posted and at least scratch_bytes of scratch. Throws timeout (naming the missing
    // ranks) or the group's abort reason.
    Slot &arrive(std::uint64_t seq, int rank, const Call &call, std::size_t scratch_bytes,
                 Clock::time_point deadline, std::uint64_t fingerprint = 0);
    // Marks rank done reading peer buffers in slot `seq`, then waits until every rank is.
    void finish_and_wait(std::uint64_t seq, Slot &slot, Clock::time_point deadline);
    // Rank leaves slot `seq`; the last to leave frees it.
    void leave(std::uint64_t seq, Slot &slot);

    // Shared child group for `color` of split slot `seq`, created by the first rank to ask.
    std::shared_ptr<InProcessGroup> child_group(Slot &slot, int color, int child_size);

    // Point to point: buffered messages keyed by (source, destination, tag).
    void post_message(int source, int dest, int tag, const Call &call);
    void take_message(int source, int dest, int tag, const Call &recv_call, Clock::time_point deadline);

    void abort(const std::string &reason, ErrorCode code);
    // Rank's communicator is gone (closed, or its thread ended and released it): a peer waiting
    // for it fails at once with peer_lost naming it, instead of waiting out the timeout.
    void depart(int rank);

  private:
    struct Message {
        Call sent;
        std::vector<unsigned char> data;
    };
    [[noreturn]] void throw_aborted();
    std::string missing_ranks(const Slot &slot) const;
    // The first rank that left the group without arriving at `slot`, or -1 (mutex held).
    int departed_missing(const Slot &slot) const;
    // Aborts with peer_lost for departed rank `who` (mutex held) and throws.
    [[noreturn]] void fail_departed(int who, const std::string &what);

    const int size_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::uint64_t, Slot> slots_;
    std::map<std::tuple<int, int, int>, std::deque<Message>> mailboxes_;
    std::vector<unsigned char> spare_scratch_; // reused across slots: no allocation per call
    std::vector<bool> departed_;
    std::string abort_reason_;
    ErrorCode abort_code_ = ErrorCode::ok;
};

} // namespace shardopt
