#include "shm_arena.hpp"

#include <fcntl.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "../env_switch.hpp"
#include "shardopt/error.hpp"

namespace shardopt::ucx {

std::size_t ShmArena::bytes_for(int ranks, bool stages) {
    const std::size_t rings = ranks <= kRingMaxRanks ? kRingBytes : 0;
    return std::size_t(ranks) * (sizeof(Bell) + 2 * kSlotBytes + rings) + (stages ? stages_bytes(ranks) : 0);
}

std::string ShmArena::create_name() {
    std::random_device rd;
    char name[64];
    std::snprintf(name, sizeof name, "/shardopt-%d-%08x%08x%08x", int(getpid()), rd(), rd(), rd());
    return name;
}

ShmArena::ShmArena(const std::string &name, int ranks, int rank, bool create, bool stages)
    : name_(name), ranks_(ranks), rank_(rank), stages_(stages && ranks <= kStageMaxRanks), pid_(std::uint64_t(getpid())),
      bytes_(bytes_for(ranks, stages_)) {
    const int fd = create ? shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600) : shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0)
        throw Error(ErrorCode::unsupported, "shm arena: cannot open " + name + ": " + std::strerror(errno));
    linked_ = create;
    struct stat st {};
    // The creator reserves the memory now: a /dev/shm too small for it fails here (and the job
    // goes without the arena) instead of killing a rank with SIGBUS when it first touches a page.
    int err = 0;
    if (create)
        err = ftruncate(fd, off_t(bytes_)) == 0 ? posix_fallocate(fd, 0, off_t(bytes_)) : errno;
    else if (fstat(fd, &st) != 0)
        err = errno;
    const bool sized = err == 0 && (create || std::size_t(st.st_size) == bytes_);
    void *p = sized ? mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (sized && p == MAP_FAILED) err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        unlink();
        throw Error(ErrorCode::unsupported, "shm arena: cannot map " + name + ": " +
                                                (err ? std::strerror(err) : "unexpected size"));
    }
    base_ = static_cast<unsigned char *>(p);
}

ShmArena::~ShmArena() {
    unlink();
    if (base_) munmap(base_, bytes_);
}

void ShmArena::unlink() {
    if (linked_) shm_unlink(name_.c_str());
    linked_ = false;
}

void ShmArena::remove_name() {
    shm_unlink(name_.c_str()); // ENOENT: the creator (or another rank) removed it already
    linked_ = false;
}

void ShmArena::publish(std::uint64_t seq, const WireHeader &header, const void *payload, std::size_t bytes,
                       const void *send, const void *recv) {
    SlotHeader &s = slot(rank_, seq);
    if (bytes) std::memcpy(bytes <= kInlineBytes ? s.inline_payload : s.payload(), payload, bytes);
    s.call = CallWords{header.count, signature_of(header), header.tag, header.context_proposal, header.fingerprint};
    s.buffers = Buffers{pid_, std::uint64_t(reinterpret_cast<std::uintptr_t>(send)),
                        std::uint64_t(reinterpret_cast<std::uintptr_t>(recv))};
    __atomic_store_n(&s.published, seq + 1, __ATOMIC_RELEASE);
    note_cpu(sched_getcpu());
    ring();
}

WireHeader ShmArena::header(int rank, std::uint64_t seq) const {
    const CallWords &c = slot(rank, seq).call;
    WireHeader h;
    h.kind = std::uint32_t(c.signature & 0xff);
    h.seq = seq;
    h.count = c.count;
    h.dtype = std::int32_t((c.signature >> 8) & 0xff);
    h.op = std::int32_t((c.signature >> 16) & 0xff);
    h.root = std::int32_t(std::uint32_t(c.signature >> 32));
    h.tag = c.tag;
    h.context_proposal = c.context_proposal;
    h.fingerprint = c.fingerprint;
    return h;
}

void ShmArena::set_finished(std::uint64_t seq) {
    __atomic_store_n(&slot(rank_, seq).finished, seq + 1, __ATOMIC_RELEASE);
    ring();
}

void ShmArena::abandon(std::uint64_t seq, int timed_out_on) {
    SlotHeader &s = slot(rank_, seq);
    __atomic_store_n(&s.timed_out_on, std::int64_t(timed_out_on), __ATOMIC_RELAXED); // published by the next store
    __atomic_store_n(&s.abandoned, seq + 1, __ATOMIC_RELEASE); // seen by whoever sees finished
    __atomic_store_n(&s.finished, seq + 1, __ATOMIC_RELEASE);
    ring();
}

// The sleeper registers, then reads the bell and re-checks; the ringer bumps the bell, then
// reads the sleeper count (both sequentially consistent): either the ringer sees the sleeper
// and wakes it, or the sleeper sees the new bell value and does not sleep.
void ShmArena::ring() {
    Bell &b = bell_of(rank_);
    __atomic_add_fetch(&b.count, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&b.sleepers, __ATOMIC_SEQ_CST) != 0)
        syscall(SYS_futex, &b.count, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void ShmArena::sleep_unless(int rank, const std::function<bool()> &ready, std::chrono::microseconds max) const {
    Bell &b = bell_of(rank);
    __atomic_add_fetch(&b.sleepers, 1, __ATOMIC_SEQ_CST); // registered before the re-check
    const std::uint32_t seen = __atomic_load_n(&b.count, __ATOMIC_SEQ_CST);
    if (!ready()) {
        const long long us = max.count();
        timespec ts{time_t(us / 1000000), long(us % 1000000) * 1000};
        syscall(SYS_futex, &b.count, FUTEX_WAIT, seen, &ts, nullptr, 0); // shared: not FUTEX_PRIVATE
    }
    __atomic_sub_fetch(&b.sleepers, 1, __ATOMIC_SEQ_CST);
}

unsigned char *ShmArena::ring_piece(int rank, std::uint64_t piece) const {
    return reinterpret_cast<unsigned char *>(&ring_header(rank) + 1) + (piece % kRingSlots) * kRingPieceBytes;
}

std::uint64_t ShmArena::count_in(std::uint64_t word, std::uint64_t seq) {
    constexpr std::uint64_t seq_mask = ~std::uint64_t(0) >> kCountBits;
    return (word >> kCountBits) == ((seq + 1) & seq_mask) ? word & kRingMaxPieces : 0;
}

void ShmArena::set_produced(std::uint64_t seq, std::uint64_t pieces) {
    __atomic_store_n(&ring_header(rank_).produced, counter_word(seq, pieces), __ATOMIC_RELEASE);
    ring();
}

std::uint64_t ShmArena::produced(int rank, std::uint64_t seq) const {
    return count_in(__atomic_load_n(&ring_header(rank).produced, __ATOMIC_ACQUIRE), seq);
}

void ShmArena::set_consumed(std::uint64_t seq, int producer, std::uint64_t pieces) {
    __atomic_store_n(&ring_header(rank_).consumed[producer], counter_word(seq, pieces), __ATOMIC_RELEASE);
    ring();
}

std::uint64_t ShmArena::consumed(int consumer, int producer, std::uint64_t seq) const {
    return count_in(__atomic_load_n(&ring_header(consumer).consumed[producer], __ATOMIC_ACQUIRE), seq);
}

unsigned char *ShmArena::stage_piece(int from, int to, std::uint64_t piece) const {
    // Rings ordered by (from, to), skipping to == from.
    const std::size_t ring = std::size_t(from) * std::size_t(ranks_ - 1) + std::size_t(to - (to > from));
    return rings_base() + std::size_t(ranks_) * kRingBytes + ring * kStageBytes + (piece % kStageSlots) * kRingPieceBytes;
}

void ShmArena::set_staged(std::uint64_t seq, int to, std::uint64_t pieces) {
    __atomic_store_n(&ring_header(rank_).staged[to], counter_word(seq, pieces), __ATOMIC_RELEASE);
    ring();
}

std::uint64_t ShmArena::staged(int from, int to, std::uint64_t seq) const {
    return count_in(__atomic_load_n(&ring_header(from).staged[to], __ATOMIC_ACQUIRE), seq);
}

bool ShmArena::finished(int rank, std::uint64_t seq) const {
    return __atomic_load_n(&slot(rank, seq).finished, __ATOMIC_ACQUIRE) == seq + 1;
}

bool ShmArena::abandoned(int rank, std::uint64_t seq) const {
    return __atomic_load_n(&slot(rank, seq).abandoned, __ATOMIC_ACQUIRE) == seq + 1;
}

int ShmArena::timed_out_on(int rank, std::uint64_t seq) const {
    if (!abandoned(rank, seq)) return -1;
    return int(__atomic_load_n(&slot(rank, seq).timed_out_on, __ATOMIC_RELAXED));
}

bool shm_arena_allowed() {
    if (const char *v = std::getenv("SHARDOPT_SHM")) return !switched_off(v);
    const char *tls = std::getenv("UCX_TLS");
    if (!tls || !*tls) return true;
    const std::string t = tls;
    if (t[0] == '^') // an exclusion list: allowed unless it excludes shared memory
        return t.find("sm") == std::string::npos && t.find("posix") == std::string::npos &&
               t.find("sysv") == std::string::npos;
    for (const char *name : {"all", "sm", "shm", "posix", "sysv", "xpmem", "cma", "knem"})
        if (t.find(name) != std::string::npos) return true;
    return false;
}

} // namespace shardopt::ucx
