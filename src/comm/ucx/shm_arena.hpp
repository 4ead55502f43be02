// ShmArena: a shared-memory segment through which the ranks of one host publish each
// collective's header (and, for small collectives, its input), so a small allreduce is one
// cache-line handoff per peer instead of UCX messages.
//
// Layout: for every rank, two slots (collective seq uses slot seq % 2). A slot's first cache line
// holds `published`, the call in compact form and, for payloads of at most kInlineBytes (an
// 8-byte allreduce), the payload itself, so a small collective costs each reader one cache-line
// transfer per peer; larger payloads (up to `capacity` bytes) follow the slot's header lines. A
// rank writes its payload and header, then stores `published = seq + 1` with release; readers
// acquire-load `published` and read the slot.
//
// Why two slots need no acknowledgements: a rank rewrites slot seq % 2 only at seq + 2, and it
// starts seq + 2 only after it has seen every rank's seq + 1 header, which each rank publishes
// only after it has finished (read every slot of) collective seq. Collectives on a communicator
// run one at a time, in the same order everywhere, so that holds for every seq.
//
// After the slots, for groups of up to kRingMaxRanks, every rank has a hand-off ring: kRingSlots
// pieces into which a large allreduce reduces its segment for the peers to copy out
// (cma_collective.cpp), with progress counters (pieces produced; pieces consumed from each
// producer; pieces staged for each peer). A counter word carries its collective's seq with the
// count, so a value left from an earlier collective never reads as progress in this one.
//
// After the rings, for groups of up to kStageMaxRanks, a staging ring for every ordered pair of
// ranks (from, to): kStageSlots pieces into which `from` copies its input for `to`'s segment,
// so `to` reduces from shared memory instead of reading `from`'s buffer through the kernel.
//
// Made by the world communicator when every rank of the job can open the same segment (one
// host); the file is unlinked as soon as everyone has mapped it, so nothing is left behind.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "wire_header.hpp"

namespace shardopt::ucx {

class ShmArena {
  public:
    // Slot payload capacity; collectives whose per-rank input fits go through the arena.
    static constexpr std::size_t kCapacity = 64 << 10;
    // Above this many local ranks the all-read algorithms stop being latency-optimal.
    static constexpr int kMaxRanks = 64;

    // Creates (rank 0) a fresh, uniquely named segment for `ranks` ranks; throws on failure.
    static std::string create_name();
    // `stages`: with staging rings (used only for groups of up to kStageMaxRanks). The creator
    // may leave them out where /dev/shm has no room for them; the others must match it.
    ShmArena(const std::string &name, int ranks, int rank, bool create, bool stages);
    ~ShmArena();
    ShmArena(const ShmArena &) = delete;
    ShmArena &operator=(const ShmArena &) = delete;

    // Removes the name (the mapping stays valid in every process that has it).
    void unlink();
    // The same from any rank that mapped it, not only the creator (when the creator may never
    // get to it); a name already gone is fine.
    void remove_name();

    // Where a rank's buffers of one collective are, for peers that copy straight out of them
    // (cma_collective.cpp: process_vm_readv).
    struct Buffers {
        std::uint64_t pid = 0, send = 0, recv = 0;
    };

    // Payloads up to this size travel in the slot's first cache line, beside `published`.
    static constexpr std::size_t kInlineBytes = 24;

    // Writes this rank's header (and `bytes` of payload, and its buffers) for collective `seq`
    // and publishes it.
    void publish(std::uint64_t seq, const WireHeader &header, const void *payload, std::size_t bytes,
                 const void *send = nullptr, const void *recv = nullptr);
    // True when `rank` has published `seq`; then header() and payload() are valid until the
    // caller's next collective.
    bool published(int rank, std::uint64_t seq) const {
        return __atomic_load_n(&slot(rank, seq).published, __ATOMIC_ACQUIRE) == seq + 1;
    }
    // True when `rank` published `seq` with the same kind, count, dtype, op and root as this rank
    // did, and no differing history fingerprint: a sufficient test that the calls agree, read
    // from the one line published() read (Exchange does the full, normalized comparison).
    bool same_call(int rank, std::uint64_t seq) const {
        const CallWords &a = slot(rank, seq).call, &b = slot(rank_, seq).call;
        return a.count == b.count && a.signature == b.signature &&
               (a.fingerprint == b.fingerprint || a.fingerprint == 0 || b.fingerprint == 0);
    }
    WireHeader header(int rank, std::uint64_t seq) const;
    // The payload `rank` published for `seq`, of `bytes` (the size the agreed call gives).
    const unsigned char *payload(int rank, std::uint64_t seq, std::size_t bytes) const {
        const SlotHeader &s = slot(rank, seq);
        return bytes <= kInlineBytes ? s.inline_payload : s.payload();
    }
    const Buffers &buffers(int rank, std::uint64_t seq) const { return slot(rank, seq).buffers; }

    // The mark that this rank has finished with its peers' buffers for `seq` (release; read
    // with acquire).
    void set_finished(std::uint64_t seq);
    bool finished(int rank, std::uint64_t seq) const;
    // The mark that this rank left collective `seq` early, on an error: it touches no peer's
    // buffers any more (so it is finished too), and its own may go away at any moment, so no
    // peer may copy to or from them (cma_collective.cpp checks before every copy). A rank that
    // left because it timed out waiting for `timed_out_on` says so: the peers waiting behind it
    // then name that rank, not the one that left (timed_out_on() below; -1 for other errors).
    void abandon(std::uint64_t seq, int timed_out_on = -1);
    bool abandoned(int rank, std::uint64_t seq) const;
    int timed_out_on(int rank, std::uint64_t seq) const;

    // Hand-off rings (see above). Piece i of a collective lives in slot i % kRingSlots.
    static constexpr int kRingMaxRanks = 8;
    static constexpr std::size_t kRingSlots = 8;
    static constexpr std::size_t kRingPieceBytes = 128 << 10;
    // Counts above this do not fit a counter word (the seq takes the other bits); callers take
    // another algorithm.
    static constexpr int kCountBits = 24;
    static constexpr std::uint64_t kRingMaxPieces = (std::uint64_t(1) << kCountBits) - 1;
    bool has_rings() const { return ranks_ <= kRingMaxRanks; }
    unsigned char *ring_piece(int rank, std::uint64_t piece) const;
    // This rank has written pieces [0, pieces) of collective seq into its ring (release).
    void set_produced(std::uint64_t seq, std::uint64_t pieces);
    std::uint64_t produced(int rank, std::uint64_t seq) const;
    // This rank has copied pieces [0, pieces) out of `producer`'s ring (release).
    void set_consumed(std::uint64_t seq, int producer, std::uint64_t pieces);
    std::uint64_t consumed(int consumer, int producer, std::uint64_t seq) const;

    // Staging rings (see above). Piece i of a collective lives in slot i % kStageSlots; `from`
    // may stage piece i once `to` has produced piece i - kStageSlots (it reduced that one).
    static constexpr int kStageMaxRanks = 4;
    static constexpr std::size_t kStageSlots = 8;
    bool has_stages() const { return stages_; }
    unsigned char *stage_piece(int from, int to, std::uint64_t piece) const;
    // This rank has staged pieces [0, pieces) of its input for `to` (release).
    void set_staged(std::uint64_t seq, int to, std::uint64_t pieces);
    std::uint64_t staged(int from, int to, std::uint64_t seq) const;

    // The CPU this rank last ran on, as of its last publish or note_cpu(): ranks that outnumber
    // the cores yield theirs only to a peer they wait for that last ran on the same one
    // (UcxComm::arena_calls_agree).
    void note_cpu(int cpu) { __atomic_store_n(&bell_of(rank_).cpu, cpu, __ATOMIC_RELAXED); }
    int cpu_of(int rank) const { return __atomic_load_n(&bell_of(rank).cpu, __ATOMIC_RELAXED); }

    // Sleeping waits: every publish or finish of a rank rings its bell (a futex word),
    // waking ranks that sleep on it. Sleeps on `rank`'s bell unless ready() holds; returns when
    // it rang or after `max`.
    void sleep_unless(int rank, const std::function<bool()> &ready, std::chrono::microseconds max) const;

    int ranks() const { return ranks_; }
    static std::size_t bytes_for(int ranks, bool stages);

  private:
    // The call in a slot, compact: WireHeader less what the arena implies (magic, seq).
    struct CallWords {
        std::uint64_t count;
        std::uint64_t signature; // kind, dtype, op (a byte each, one spare), root
        std::int32_t tag;
        std::uint32_t context_proposal;
        std::uint64_t fingerprint;
    };
    static std::uint64_t signature_of(const WireHeader &h) {
        return std::uint64_t(h.kind & 0xff) | std::uint64_t(std::uint32_t(h.dtype) & 0xff) << 8 |
               std::uint64_t(std::uint32_t(h.op) & 0xff) << 16 | std::uint64_t(std::uint32_t(h.root)) << 32;
    }
    struct alignas(64) SlotHeader {
        // Line 0: all a small collective's reader touches.
        std::uint64_t published; // seq + 1 of the last collective written here (atomic)
        CallWords call;
        unsigned char inline_payload[kInlineBytes];
        // Line 1: the buffers, for the cross-process copies.
        alignas(64) Buffers buffers;
        alignas(64) std::uint64_t finished; // seq + 1 once done with the peers' buffers (own line: polled)
        std::uint64_t abandoned;            // seq + 1 once left on an error (set before finished)
        std::int64_t timed_out_on;          // the rank it gave up waiting for, when it left on a timeout, else -1
        const unsigned char *payload() const { return reinterpret_cast<const unsigned char *>(this + 1); }
        unsigned char *payload() { return reinterpret_cast<unsigned char *>(this + 1); }
    };
    static constexpr std::size_t kSlotBytes = sizeof(SlotHeader) + kCapacity;
    static_assert(sizeof(std::uint64_t) + sizeof(CallWords) + kInlineBytes == 64,
                  "a slot's first line holds published, the call and a small payload");
    // A ring's counters: each on its own line (produced is polled by every peer; consumed[p] and
    // staged[p] are written by this rank only, read by rank p).
    struct alignas(64) RingHeader {
        std::uint64_t produced;
        alignas(64) std::uint64_t consumed[kRingMaxRanks];
        alignas(64) std::uint64_t staged[kRingMaxRanks];
    };
    static constexpr std::size_t kRingBytes = sizeof(RingHeader) + kRingSlots * kRingPieceBytes;
    RingHeader &ring_header(int rank) const {
        return *reinterpret_cast<RingHeader *>(rings_base() + std::size_t(rank) * kRingBytes);
    }
    unsigned char *rings_base() const { return base_ + std::size_t(ranks_) * (sizeof(Bell) + 2 * kSlotBytes); }
    static constexpr std::size_t kStageBytes = kStageSlots * kRingPieceBytes;
    static std::size_t stages_bytes(int ranks) { return std::size_t(ranks) * std::size_t(ranks - 1) * kStageBytes; }
    static std::uint64_t counter_word(std::uint64_t seq, std::uint64_t count) {
        return ((seq + 1) << kCountBits) | count;
    }
    static std::uint64_t count_in(std::uint64_t word, std::uint64_t seq);
    // One line per rank ahead of the slots: its bell, how many ranks sleep on it, and the CPU
    // it last ran on.
    struct alignas(64) Bell {
        std::uint32_t count;
        std::uint32_t sleepers;
        std::int32_t cpu;
    };

    Bell &bell_of(int rank) const { return reinterpret_cast<Bell *>(base_)[rank]; }
    SlotHeader &slot(int rank, std::uint64_t seq) const {
        return *reinterpret_cast<SlotHeader *>(base_ + std::size_t(ranks_) * sizeof(Bell) +
                                               (std::size_t(rank) * 2 + seq % 2) * kSlotBytes);
    }
    void ring();

    std::string name_;
    int ranks_, rank_;
    bool stages_;
    std::uint64_t pid_;
    std::size_t bytes_;
    unsigned char *base_ = nullptr;
    bool linked_ = false;
};

// Whether this job may use a shared-memory arena: SHARDOPT_SHM=0 turns it off, and so does a
// UCX_TLS that names no shared-memory transport (the user asked for the network only).
bool shm_arena_allowed();

} // namespace shardopt::ucx
