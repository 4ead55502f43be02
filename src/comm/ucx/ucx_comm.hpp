// UcxComm: a Communicator whose ranks are processes joined through one shared ucx::Worker.
// A communicator is (worker, the world ranks of its members, a context id for its tags);
// split() makes a new one over the same endpoints with a context id agreed by its parent.
//
// Every blocking wait goes through block(): it progresses the worker, and fails the call when
// the deadline passes (timeout), when a peer it waits on is lost (peer_lost), when another
// rank's abort notice arrives, or when this communicator is aborted locally. Aborting sends a
// notice to every other member so that ranks not talking to the failed one fail fast too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host_layout.hpp"
#include "shardopt/comm.hpp"
#include "hier_piece.hpp"
#include "shm_arena.hpp"
#include "ucx_tags.hpp"
#include "ucx_worker.hpp"

namespace shardopt::ucx {

// Tunables, read once from the environment (SHARDOPT_UCX_*).
struct Tuning {
    std::size_t small_bytes = 64 << 10;     // allreduce/bcast/reduce at most this: latency algorithms
    std::size_t chunk_bytes = 1 << 20;       // pipeline chunk of ring and tree algorithms
    std::size_t recv_slots = 4;              // ring reduce-scatter: chunks received ahead
    std::chrono::microseconds spin{50};      // busy-poll this long before sleeping on the event fd
    bool cma = true;                         // ranks on one host copy from each other's buffers
    // One-host allreduce at least this: hand-off rings. 0 (default): 4 MiB when every rank has
    // a core of its own (below it the cross-process copies are faster: 2 ranks, interleaved,
    // 1.4-1.5x at 1 and 2 MiB, even at 4, the rings 1.5x at 8; collectives.md), 16 MiB when ranks
    // outnumber the cores (the hand-off's per-piece waits then cost a scheduler round each, and
    // cross-process copies, which need no peer running, win).
    std::size_t handoff_bytes = 0;
    static constexpr std::size_t kHandoffOwnCores = 4 << 20, kHandoffSharedCores = 16 << 20;
    bool stage_inputs = true;                // hand-off in groups of up to 4: inputs through staging rings
    // Hierarchical allreduce over more than this: pieces of this size, each piece's inter-host
    // step overlapping the host steps of its neighbours. Unset: from a probe of the links at
    // attach (hier_piece.hpp).
    std::size_t hier_piece_bytes = kHierPieceAuto;
    static const Tuning &get();
};

struct ExchangeStorage;

class UcxComm final : public Communicator {
  public:
    UcxComm(std::shared_ptr<Worker> worker, std::vector<int> world_ranks, int rank, std::uint32_t context);
    ~UcxComm() override;

    std::string backend_name() const override { return "ucx"; }

    Worker &worker() { return *worker_; }
    int world_rank_of(int rank) const { return world_ranks_[rank]; }
    std::uint32_t context() const { return context_; }
    // The shared-memory arena of a communicator whose ranks share a host (the world
    // communicator and the communicators split from it), or null.
    ShmArena *arena() const { return arena_.get(); }
    // Agreed by every rank when the arena attached: whether the ranks may copy between each
    // other's memory; whether the hand-off stages its inputs (the arena has staging rings and
    // every rank allows it); and from what size one-host allreduces hand off (the largest
    // Tuning::handoff_bytes of any rank).
    bool cma() const { return cma_; }
    bool stage_inputs() const { return stage_inputs_; }
    std::size_t handoff_bytes() const { return handoff_bytes_; }
    // Sets up the arena when every rank can map it (collective over this communicator: every
    // member must call it, whatever its environment says).
    void attach_shm_arena();
    // Learns which ranks share a host (host_layout.hpp; a collective exchange of host keys) and
    // then sets up the arena (one host) or the hierarchy (several). Collective, like the above.
    void attach_hosts();
    // Ranks on several hosts, the same number on each (at least 2), with no rank setting
    // SHARDOPT_HIERARCHY=0: the host's own communicator (local rank order) and the communicator
    // of this local rank across the hosts (host order). Null otherwise; with
    // SHARDOPT_HIERARCHY=1 on any rank, attach_hosts() then fails instead.
    struct Hierarchy {
        HostLayout layout;
        std::shared_ptr<Communicator> local, cross;
    };
    const Hierarchy *hierarchy() const { return hierarchy_.get(); }
    // Hierarchical allreduces over this are cut into pieces this size: the largest
    // SHARDOPT_UCX_HIER_PIECE_BYTES of any rank, agreed in attach_hosts, or when no rank set it,
    // what the probe of the links found (probe_hier_piece_bytes).
    std::size_t hier_piece_bytes() const { return hier_piece_bytes_; }
    ExchangeStorage &exchange_storage() { return *exchange_storage_; }
    Clock::duration spin_time() const { return Tuning::get().spin; }
    // More ranks on this host than cores this process may run on: waits yield instead of spinning.
    bool shares_cores() const { return shares_cores_; }
    // Scratch buffer `slot` of at least `bytes`, reused across calls (collective queue only).
    unsigned char *scratch(int slot, std::size_t bytes);

    // Blocks until pred() (evaluated with the worker lock held, after progress) is true. `waiting_on`
    // says whether a lost communicator rank matters to this wait; timeout_text builds the
    // message when the deadline passes.
    void block(const std::function<bool()> &pred, Clock::time_point deadline,
               const std::function<bool(int)> &waiting_on, const std::function<std::string()> &timeout_text);

    // One round of block()'s checks without waiting: true when pred() holds; throws as block()
    // does. For waits on something UCX does not signal (a peer's progress in the arena).
    bool poll_once(const std::function<bool()> &pred, Clock::time_point deadline,
                   const std::function<bool(int)> &waiting_on, const std::function<std::string()> &timeout_text,
                   Clock::time_point &lost_grace);

  protected:
    void run(const Call &call) override;
    CommunicatorPtr run_split(int color, int key) override;
    void on_abort(const std::string &reason, ErrorCode code) override;

  private:
    void run_send(const Call &call);
    void run_recv(const Call &call);
    void run_collective(const Call &call);
    // A collective in the arena: true once every peer published `seq` with this rank's call;
    // false when the spin ran out first or a peer's call differs (an Exchange takes over).
    bool arena_calls_agree(std::uint64_t seq) const;
    void poll_notice_locked();
    // With host_keys_ known: the arena when they are all one host, else the hierarchy.
    void attach_by_host_keys(bool hierarchy_allowed);
    // Times an allreduce across the hosts by all local ranks at once; every rank gets the same
    // piece size (collective over the hierarchy's communicators).
    std::size_t probe_hier_piece_bytes(const Hierarchy &hy);

    std::shared_ptr<Worker> worker_;
    std::vector<int> world_ranks_;
    std::uint32_t context_;
    std::uint64_t next_seq_ = 0;
    std::vector<std::vector<unsigned char>> scratch_;
    std::unique_ptr<ShmArena> arena_;
    std::vector<std::uint64_t> host_keys_; // per rank, once attach_hosts ran (split children inherit them)
    bool hierarchy_allowed_ = false;       // agreed by every rank in attach_hosts
    std::size_t hier_piece_bytes_ = kHierPieceAuto; // agreed likewise (Tuning::hier_piece_bytes)
    std::unique_ptr<Hierarchy> hierarchy_;
    std::unique_ptr<ExchangeStorage> exchange_storage_;
    bool shares_cores_ = false;
    bool cma_ = false; // ranks may read and write each other's memory (process_vm_readv/writev; agreed at attach)
    bool stage_inputs_ = false;
    std::size_t handoff_bytes_ = SIZE_MAX;

    // Abort notices from other ranks: one receive posted for the communicator's lifetime.
    std::mutex notice_mutex_;
    Request notice_request_;
    std::vector<unsigned char> notice_buffer_;
    bool notice_seen_ = false;
    ErrorCode notice_code_ = ErrorCode::ok;
    std::string notice_text_;
};

} // namespace shardopt::ucx
