#include "conformance_cases.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <thread>

#include "shardopt/error.hpp"
#include "shardopt/half.hpp"

namespace shardopt::conformance {
namespace {

constexpr std::size_t kLargeCount = (std::size_t(1) << 20) + 7; // > 1M, odd
const std::size_t kLengths[] = {0, 1, 13, kLargeCount};

[[noreturn]] void fail(const std::string &what) { throw CaseFailure(what); }

// --- typed element access through DType ----------------------------------------------------
double load(const void *base, std::size_t i, DType dtype) {
    switch (dtype) {
    case DType::f32: return static_cast<const float *>(base)[i];
    case DType::f64: return static_cast<const double *>(base)[i];
    case DType::f16: return float(static_cast<const f16 *>(base)[i]);
    case DType::bf16: return float(static_cast<const bf16 *>(base)[i]);
    case DType::i32: return static_cast<const int32_t *>(base)[i];
    case DType::i64: return double(static_cast<const int64_t *>(base)[i]);
    case DType::u8: return static_cast<const uint8_t *>(base)[i];
    }
    return 0;
}

void store(void *base, std::size_t i, DType dtype, double v) {
    switch (dtype) {
    case DType::f32: static_cast<float *>(base)[i] = float(v); break;
    case DType::f64: static_cast<double *>(base)[i] = v; break;
    case DType::f16: static_cast<f16 *>(base)[i] = f16(float(v)); break;
    case DType::bf16: static_cast<bf16 *>(base)[i] = bf16(float(v)); break;
    case DType::i32: static_cast<int32_t *>(base)[i] = int32_t(v); break;
    case DType::i64: static_cast<int64_t *>(base)[i] = int64_t(v); break;
    case DType::u8: static_cast<uint8_t *>(base)[i] = uint8_t(v); break;
    }
}

// Inputs are small integers (or powers of two for prod) so every reduction order gives the
// same exact answer in every dtype; only avg rounds, once, the way the reference does.
double input_value(DType dtype, ReduceOp op, int rank, std::size_t i) {
    const std::size_t k = std::size_t(rank) + i;
    if (op == ReduceOp::prod) {
        static const double floats[] = {1, -1, 2, 0.5}, ints[] = {1, -1, 2, 1}, bytes[] = {1, 3, 2, 1};
        if (dtype == DType::u8) return bytes[k % 4];
        return is_floating(dtype) ? floats[k % 4] : ints[k % 4];
    }
    const double v = double((std::size_t(rank) * 7 + i * 3) % 11);
    return dtype == DType::u8 ? v : v - 5;
}

// Reference reduction of element i over `n` ranks, rounded as the dtype's accumulator does.
double reference(DType dtype, ReduceOp op, int n, std::size_t i) {
    double acc = input_value(dtype, op, 0, i);
    for (int r = 1; r < n; ++r) {
        const double v = input_value(dtype, op, r, i);
        switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: acc += v; break;
        case ReduceOp::prod: acc *= v; break;
        case ReduceOp::min: acc = std::min(acc, v); break;
        case ReduceOp::max: acc = std::max(acc, v); break;
        }
    }
    if (dtype == DType::u8 && op == ReduceOp::prod) acc = double(uint64_t(acc) % 256);
    if (op == ReduceOp::avg) {
        switch (dtype) {
        case DType::f64: acc = acc / n; break;
        case DType::f32:
        case DType::f16:
        case DType::bf16: acc = double(float(acc) / float(n)); break;
        default: acc = double(int64_t(acc) / n); break; // integer division truncates
        }
    }
    // Round through the storage type, as the implementation's final store does.
    unsigned char tmp[8];
    store(tmp, 0, dtype, acc);
    return load(tmp, 0, dtype);
}

// What rank `rank` put at index i for non-reducing collectives.
double load_input(DType dtype, int rank, std::size_t i) {
    unsigned char tmp[8];
    store(tmp, 0, dtype, input_value(dtype, ReduceOp::sum, rank, i));
    return load(tmp, 0, dtype);
}

std::vector<unsigned char> make_buffer(std::size_t count, DType dtype) {
    return std::vector<unsigned char>(count * dtype_size(dtype) + 1); // +1: never a null data()
}

void fill_inputs(void *buf, std::size_t count, DType dtype, ReduceOp op, int rank, std::size_t index_offset = 0) {
    for (std::size_t i = 0; i < count; ++i) store(buf, i, dtype, input_value(dtype, op, rank, index_offset + i));
}

// Indices to check: all of a small buffer; for large ones, a stride plus both ends.
template <typename Fn> void for_checked_indices(std::size_t count, Fn fn) {
    if (count <= 4096) {
        for (std::size_t i = 0; i < count; ++i) fn(i);
        return;
    }
    for (std::size_t i = 0; i < 1024; ++i) fn(i);
    for (std::size_t i = 1024; i < count - 1024; i += 97) fn(i);
    for (std::size_t i = count - 1024; i < count; ++i) fn(i);
}

void expect_equal(double got, double want, const std::string &what, std::size_t i) {
    if (!(got == want)) {
        std::ostringstream out;
        out << what << ": element " << i << " is " << got << ", expected " << want;
        fail(out.str());
    }
}

std::string label(const char *kind, DType dtype, ReduceOp op, std::size_t count, bool in_place) {
    std::ostringstream out;
    out << kind << " " << dtype_name(dtype) << " " << reduce_op_name(op) << " count=" << count
        << (in_place ? " in-place" : "");
    return out.str();
}

// --- collectives --------------------------------------------------------------------------
void check_allreduce(Communicator &comm, DType dtype, ReduceOp op) {
    for (std::size_t count : kLengths)
        for (bool in_place : {false, true}) {
            auto send = make_buffer(count, dtype), recv = make_buffer(count, dtype);
            fill_inputs(send.data(), count, dtype, op, comm.rank());
            void *out = in_place ? send.data() : recv.data();
            comm.allreduce(send.data(), out, count, dtype, op);
            const auto what = label("allreduce", dtype, op, count, in_place);
            for_checked_indices(count, [&](std::size_t i) {
                expect_equal(load(out, i, dtype), reference(dtype, op, comm.size(), i), what, i);
            });
        }
}

void check_reduce(Communicator &comm, DType dtype, ReduceOp op) {
    for (std::size_t count : kLengths) {
        const int root = comm.size() - 1;
        auto send = make_buffer(count, dtype), recv = make_buffer(count, dtype);
        fill_inputs(send.data(), count, dtype, op, comm.rank());
        comm.reduce(send.data(), comm.rank() == root ? recv.data() : nullptr, count, dtype, op, root);
        if (comm.rank() != root) continue;
        const auto what = label("reduce", dtype, op, count, false);
        for_checked_indices(count, [&](std::size_t i) {
            expect_equal(load(recv.data(), i, dtype), reference(dtype, op, comm.size(), i), what, i);
        });
    }
}

void check_reduce_scatter(Communicator &comm, DType dtype, ReduceOp op) {
    const int n = comm.size();
    for (std::size_t total : kLengths)
        for (bool in_place : {false, true}) {
            const std::size_t count = total == 0 ? 0 : total / n + 1; // per-rank, never a multiple
            auto send = make_buffer(count * n, dtype), recv = make_buffer(count, dtype);
            fill_inputs(send.data(), count * n, dtype, op, comm.rank());
            void *out = in_place ? send.data() + comm.rank() * count * dtype_size(dtype) : recv.data();
            comm.reduce_scatter(send.data(), out, count, dtype, op);
            const auto what = label("reduce_scatter", dtype, op, count, in_place);
            const std::size_t offset = std::size_t(comm.rank()) * count;
            for_checked_indices(count, [&](std::size_t i) {
                expect_equal(load(out, i, dtype), reference(dtype, op, n, offset + i), what, i);
            });
        }
}

void check_allgather(Communicator &comm, DType dtype) {
    const int n = comm.size();
    for (std::size_t total : kLengths)
        for (bool in_place : {false, true}) {
            const std::size_t count = total == 0 ? 0 : total / n + 1;
            auto send = make_buffer(count, dtype), recv = make_buffer(count * n, dtype);
            void *mine = in_place ? recv.data() + comm.rank() * count * dtype_size(dtype) : send.data();
            fill_inputs(mine, count, dtype, ReduceOp::sum, comm.rank(), 0);
            comm.allgather(mine, recv.data(), count, dtype);
            const auto what = label("allgather", dtype, ReduceOp::sum, count, in_place);
            for_checked_indices(count * n, [&](std::size_t i) {
                const int owner = int(i / count);
                expect_equal(load(recv.data(), i, dtype), load_input(dtype, owner, i % count), what, i);
            });
        }
}

void check_broadcast(Communicator &comm, DType dtype) {
    for (std::size_t count : kLengths)
        for (int root : {0, comm.size() - 1}) {
            auto buf = make_buffer(count, dtype);
            if (comm.rank() == root) fill_inputs(buf.data(), count, dtype, ReduceOp::sum, root);
            comm.broadcast(buf.data(), count, dtype, root);
            const auto what = label("broadcast", dtype, ReduceOp::sum, count, true) + " root=" + std::to_string(root);
            for_checked_indices(count, [&](std::size_t i) {
                expect_equal(load(buf.data(), i, dtype), load_input(dtype, root, i), what, i);
            });
        }
}

void check_send_recv(Communicator &comm, DType dtype) {
    const int n = comm.size(), me = comm.rank();
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    for (std::size_t count : kLengths)
        for (int tag : {0, 7}) {
            auto out = make_buffer(count, dtype), in = make_buffer(count, dtype);
            fill_inputs(out.data(), count, dtype, ReduceOp::sum, me);
            // Async receive first so every rank can send without a deadlock at any size.
            auto pending = comm.recv_async(in.data(), count, dtype, prev, tag);
            comm.send(out.data(), count, dtype, next, tag);
            pending->wait();
            const auto what = "send/recv " + std::string(dtype_name(dtype)) + " count=" + std::to_string(count);
            for_checked_indices(count, [&](std::size_t i) {
                expect_equal(load(in.data(), i, dtype), load_input(dtype, prev, i), what, i);
            });
        }
}

// --- structure: split, async, determinism ---------------------------------------------------
void check_split(Communicator &comm) {
    const int n = comm.size(), me = comm.rank();
    // Two colors, keys reversing the order inside each.
    auto child = comm.split(me % 2, -me);
    const int members = (n - me % 2 + 1) / 2;
    if (!child) fail("split returned no communicator for a non-negative color");
    if (child->size() != members)
        fail("split: size " + std::to_string(child->size()) + ", expected " + std::to_string(members));
    const int expected_rank = members - 1 - me / 2;
    if (child->rank() != expected_rank)
        fail("split: rank " + std::to_string(child->rank()) + ", expected " + std::to_string(expected_rank));
    // A sum over the child group sees only its members.
    int64_t value = me, sum = 0;
    child->allreduce(&value, &sum, 1, DType::i64, ReduceOp::sum);
    int64_t expected = 0;
    for (int r = me % 2; r < n; r += 2) expected += r;
    if (sum != expected) fail("split: child allreduce gave " + std::to_string(sum) + ", expected " + std::to_string(expected));
    // Splitting the child again, and color < 0 opting out.
    auto grandchild = child->split(child->rank() == 0 ? -1 : 0, child->rank());
    if (child->rank() == 0 && grandchild) fail("split: color -1 must give no communicator");
    if (child->rank() != 0) {
        if (!grandchild || grandchild->size() != child->size() - 1) fail("split: nested split has the wrong size");
        grandchild->barrier();
    }
    // The parent still works after its children are gone.
    child.reset();
    grandchild.reset();
    comm.barrier();
}

void check_async(Communicator &comm) {
    const int n = comm.size();
    constexpr int kOps = 6;
    constexpr std::size_t kCount = 100003;
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(kCount));
    std::vector<WorkPtr> works;
    for (int k = 0; k < kOps; ++k) {
        for (std::size_t i = 0; i < kCount; ++i) bufs[k][i] = float(comm.rank() + k);
        works.push_back(comm.allreduce_async(bufs[k].data(), bufs[k].data(), kCount, DType::f32, ReduceOp::sum));
    }
    // A blocking call issued after async ones runs after them.
    float probe = 1.0f;
    comm.allreduce(&probe, &probe, 1, DType::f32, ReduceOp::sum);
    for (int k = 0; k < kOps; ++k) {
        if (!works[k]->test()) fail("async: work issued before a completed blocking call is not done");
        works[k]->wait();
        works[k]->wait(); // idempotent
        const float want = float(n * (n - 1) / 2 + n * k);
        if (bufs[k][0] != want || bufs[k][kCount - 1] != want) fail("async: wrong result for operation " + std::to_string(k));
    }
    if (probe != float(n)) fail("async: blocking allreduce after async ones is wrong");
    // Mixed kinds in flight at once.
    std::vector<double> gathered(n * 3);
    double mine[3] = {double(comm.rank()), 1.0, 2.0};
    int64_t root_value = comm.rank() == 0 ? 42 : 0;
    auto w1 = comm.allgather_async(mine, gathered.data(), 3, DType::f64);
    auto w2 = comm.broadcast_async(&root_value, 1, DType::i64, 0);
    auto w3 = comm.barrier_async();
    w3->wait();
    w1->wait();
    w2->wait();
    if (root_value != 42) fail("async broadcast wrong");
    for (int r = 0; r < n; ++r)
        if (gathered[r * 3] != r || gathered[r * 3 + 2] != 2.0) fail("async allgather wrong");
}

// Non-exact float data: repeated runs must agree bit for bit.
void check_determinism(Communicator &comm) {
    constexpr std::size_t kCount = 65537;
    std::vector<float> base(kCount);
    uint32_t state = 12345u + 7919u * uint32_t(comm.rank());
    for (auto &v : base) {
        state = state * 1664525u + 1013904223u;
        v = float(state >> 8) / float(1u << 24) * 2.0f - 1.0f;
    }
    std::vector<float> first(kCount), again(kCount), scattered(kCount / 1 + 1);
    comm.allreduce(base.data(), first.data(), kCount, DType::f32, ReduceOp::sum);
    for (int round = 0; round < 3; ++round) {
        comm.allreduce(base.data(), again.data(), kCount, DType::f32, ReduceOp::sum);
        if (std::memcmp(first.data(), again.data(), kCount * sizeof(float)) != 0)
            fail("determinism: allreduce results differ between identical calls");
    }
}

// Communicator::bytes_sent counts what really moved: a point-to-point send exactly its payload,
// a collective at least what any algorithm must move (allreduce: every rank's input has to reach
// the others, (p-1) x size over the group) and not absurdly more.
void check_traffic(Communicator &comm) {
    const int p = comm.size(), r = comm.rank();
    if (p == 1) return;
    constexpr std::size_t kCount = std::size_t(1) << 20;
    const std::size_t bytes = kCount * sizeof(float);
    std::vector<float> data(kCount, 1.0f), out(kCount);
    auto group_total = [&](std::uint64_t before) {
        std::int64_t delta = std::int64_t(comm.bytes_sent() - before), all[64] = {};
        comm.allgather(&delta, all, 1, DType::i64);
        std::int64_t sum = 0;
        for (int k = 0; k < p; ++k) sum += all[k];
        return std::pair<std::int64_t, std::int64_t>{delta, sum};
    };
    if (p > 64) return;
    std::uint64_t before = comm.bytes_sent();
    comm.send(data.data(), kCount, DType::f32, (r + 1) % p, 31);
    comm.recv(out.data(), kCount, DType::f32, (r + p - 1) % p, 31);
    auto [mine, total] = group_total(before);
    if (mine != std::int64_t(bytes))
        fail("traffic: a send of " + std::to_string(bytes) + " bytes counted " + std::to_string(mine));
    for (CallKind kind : {CallKind::allreduce, CallKind::allgather}) {
        before = comm.bytes_sent();
        if (kind == CallKind::allreduce) comm.allreduce(data.data(), out.data(), kCount, DType::f32, ReduceOp::sum);
        else {
            std::vector<float> gathered(kCount * std::size_t(p));
            comm.allgather(data.data(), gathered.data(), kCount, DType::f32);
        }
        total = group_total(before).second;
        const std::int64_t least = std::int64_t(p - 1) * std::int64_t(bytes) * (kind == CallKind::allgather ? p : 1);
        const std::int64_t most = std::int64_t(p) * std::int64_t(p) * std::int64_t(bytes) + (1 << 20);
        if (total < least || total > most)
            fail(std::string("traffic: ") + call_kind_name(kind) + " of " + std::to_string(bytes) +
                 " bytes per rank counted " + std::to_string(total) + " over the group, outside [" +
                 std::to_string(least) + ", " + std::to_string(most) + "]");
    }
}

void check_barrier(Communicator &comm) {
    for (int i = 0; i < 20; ++i) comm.barrier();
}

// --- failures: each on a communicator of its own --------------------------------------------
void expect_error(ErrorCode code, const std::vector<std::string> &needles, const std::function<void()> &body,
                  const std::string &what) {
    try {
        body();
    } catch (const Error &e) {
        if (e.code() != code)
            fail(what + ": expected " + error_code_name(code) + ", got " + error_code_name(e.code()) + ": " + e.what());
        for (const auto &needle : needles)
            if (std::string(e.what()).find(needle) == std::string::npos)
                fail(what + ": message lacks '" + needle + "': " + e.what());
        // A communicator wrapping another (a GPU one over UCX, a test adapter over that) must
        // not append its trail of recent calls to one the inner communicator already attached.
        const std::string text = e.what(), trail = "recent calls (oldest first)";
        const std::size_t first = text.find(trail);
        if (first != std::string::npos && text.find(trail, first + 1) != std::string::npos)
            fail(what + ": the trail of recent calls appears more than once: " + text);
        return;
    }
    fail(what + ": no error raised");
}

void check_timeout(Communicator &comm) {
    comm.set_timeout(std::chrono::milliseconds(300));
    const int late = comm.size() - 1;
    if (comm.rank() == late) return; // never arrives
    float x = 1.0f;
    const auto start = std::chrono::steady_clock::now();
    expect_error(ErrorCode::timeout, {"allreduce", std::to_string(late)},
                 [&] { comm.allreduce(&x, &x, 1, DType::f32, ReduceOp::sum); }, "timeout");
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > std::chrono::seconds(10)) fail("timeout: took far longer than the 300 ms timeout");
    // The communicator stays failed, with the reason.
    expect_error(ErrorCode::timeout, {"allreduce"}, [&] { comm.barrier(); }, "call after timeout");
}

void check_recv_timeout(Communicator &comm) {
    comm.set_timeout(std::chrono::milliseconds(300));
    if (comm.rank() != 0) return;
    int32_t x = 0;
    expect_error(ErrorCode::timeout, {"recv", "rank 1"}, [&] { comm.recv(&x, 1, DType::i32, 1, 3); }, "recv timeout");
}

// Ranks other than 0 call `other`; every rank must get a mismatch naming both calls.
void check_mismatch(Communicator &comm, const Call &zero, const Call &other) {
    comm.set_timeout(std::chrono::seconds(20));
    const Call &mine = comm.rank() == 0 ? zero : other;
    const std::size_t bytes = std::max<std::size_t>(64, mine.count * dtype_size(mine.dtype));
    std::vector<unsigned char> a(bytes), b(bytes);
    expect_error(ErrorCode::mismatch, {describe(zero), describe(other)},
                 [&] {
                     switch (mine.kind) {
                     case CallKind::allreduce: comm.allreduce(a.data(), b.data(), mine.count, mine.dtype, mine.op); break;
                     case CallKind::broadcast: comm.broadcast(a.data(), mine.count, mine.dtype, mine.root); break;
                     case CallKind::reduce:
                         comm.reduce(a.data(), b.data(), mine.count, mine.dtype, mine.op, mine.root);
                         break;
                     default: fail("mismatch: unexpected kind");
                     }
                 },
                 "mismatch " + describe(zero) + " vs " + describe(other));
}

// Rank 0 calls allreduce then broadcast, the others broadcast then allreduce: every rank's
// error names both calls, the collective number, and lists its own recent calls.
void check_mismatch_order(Communicator &comm) {
    comm.set_timeout(std::chrono::seconds(20));
    std::vector<float> a(8, 1.0f);
    comm.barrier(); // collective #0, agreed
    const std::string ar = "allreduce(count=8, dtype=f32, op=sum)", bc = "broadcast(count=8, dtype=f32, root=0)";
    expect_error(ErrorCode::mismatch, {ar, bc, "collective #1", "recent calls", "#0 barrier() ok"},
                 [&] {
                     if (comm.rank() == 0) {
                         comm.allreduce(a.data(), a.data(), 8, DType::f32, ReduceOp::sum);
                         comm.broadcast(a.data(), 8, DType::f32, 0);
                     } else {
                         comm.broadcast(a.data(), 8, DType::f32, 0);
                         comm.allreduce(a.data(), a.data(), 8, DType::f32, ReduceOp::sum);
                     }
                 },
                 "collectives in a different order");
}

// A timeout's report on each waiting rank names the missing rank and its own recent calls.
void check_timeout_diagnostics(Communicator &comm) {
    comm.set_timeout(std::chrono::milliseconds(300));
    float x = 1.0f;
    comm.allreduce(&x, &x, 1, DType::f32, ReduceOp::max);
    const int late = comm.size() - 1;
    if (comm.rank() == late) return;
    expect_error(ErrorCode::timeout,
                 {"never arrived: " + std::to_string(late), "recent calls (oldest first): #0 allreduce(count=1, "
                                                            "dtype=f32, op=max) ok; #1 barrier() failed"},
                 [&] { comm.barrier(); }, "timeout diagnostics");
}

Call call_of(CallKind kind, std::size_t count, DType dtype, ReduceOp op = ReduceOp::sum, int root = 0) {
    Call c;
    c.kind = kind;
    c.count = count;
    c.dtype = dtype;
    c.op = op;
    c.root = root;
    return c;
}

} // namespace

std::vector<Case> collective_cases() {
    std::vector<Case> cases;
    for (int d = 0; d < kDTypeCount; ++d) {
        const DType dtype = DType(d);
        for (int o = 0; o < kReduceOpCount; ++o) {
            const ReduceOp op = ReduceOp(o);
            const std::string suffix = std::string("_") + dtype_name(dtype) + "_" + reduce_op_name(op);
            cases.push_back({"allreduce" + suffix, 1, false, [=](Communicator &c) { check_allreduce(c, dtype, op); }});
            cases.push_back({"reduce" + suffix, 1, false, [=](Communicator &c) { check_reduce(c, dtype, op); }});
            cases.push_back(
                {"reduce_scatter" + suffix, 1, false, [=](Communicator &c) { check_reduce_scatter(c, dtype, op); }});
        }
        const std::string suffix = std::string("_") + dtype_name(dtype);
        cases.push_back({"allgather" + suffix, 1, false, [=](Communicator &c) { check_allgather(c, dtype); }});
        cases.push_back({"broadcast" + suffix, 1, false, [=](Communicator &c) { check_broadcast(c, dtype); }});
        cases.push_back({"send_recv" + suffix, 1, false, [=](Communicator &c) { check_send_recv(c, dtype); }});
    }
    cases.push_back({"split", 1, false, check_split});
    cases.push_back({"async", 1, false, check_async});
    cases.push_back({"determinism", 1, false, check_determinism});
    cases.push_back({"barrier", 1, false, check_barrier});
    cases.push_back({"traffic", 1, false, check_traffic});
    return cases;
}

std::vector<Case> failure_cases() {
    using K = CallKind;
    std::vector<Case> cases;
    cases.push_back({"timeout_missing_rank", 2, true, check_timeout});
    cases.push_back({"timeout_recv", 2, true, check_recv_timeout});
    cases.push_back({"timeout_diagnostics", 2, true, check_timeout_diagnostics});
    cases.push_back({"mismatch_order", 2, true, check_mismatch_order});
    auto mismatch = [&](const std::string &name, Call zero, Call other) {
        cases.push_back({"mismatch_" + name, 2, true, [=](Communicator &c) { check_mismatch(c, zero, other); }});
    };
    mismatch("kind", call_of(K::allreduce, 4, DType::f32), call_of(K::broadcast, 4, DType::f32));
    mismatch("count", call_of(K::allreduce, 4, DType::f32), call_of(K::allreduce, 5, DType::f32));
    mismatch("dtype", call_of(K::allreduce, 4, DType::f32), call_of(K::allreduce, 4, DType::i32));
    mismatch("op", call_of(K::allreduce, 4, DType::f32, ReduceOp::sum), call_of(K::allreduce, 4, DType::f32, ReduceOp::max));
    mismatch("root", call_of(K::broadcast, 4, DType::f32, ReduceOp::sum, 0),
             call_of(K::broadcast, 4, DType::f32, ReduceOp::sum, 1));
    // One side small (latency algorithm, or the shared-memory arena on one host), the other
    // large (ring): they choose different algorithms and must still report the mismatch.
    mismatch("size_class", call_of(K::allreduce, 4, DType::f32), call_of(K::allreduce, 1 << 20, DType::f32));
    return cases;
}

} // namespace shardopt::conformance
