// Ring segment layout and the pipelined ring reduce-scatter / allgather cores.
#include "ring.hpp"

#include <algorithm>
#include <cstring>

#include "../reduction.hpp"

namespace shardopt::ucx {

ReduceOp accumulate_op(ReduceOp op) { return op == ReduceOp::avg ? ReduceOp::sum : op; }

Segments even_segments(std::size_t count, int n) {
    Segments s;
    s.offset.resize(n);
    s.count.resize(n);
    const std::size_t base = count / std::size_t(n), extra = count % std::size_t(n);
    std::size_t off = 0;
    for (int i = 0; i < n; ++i) {
        s.offset[i] = off;
        s.count[i] = base + (std::size_t(i) < extra ? 1 : 0);
        off += s.count[i];
        s.max_count = std::max(s.max_count, s.count[i]);
    }
    return s;
}

Segments equal_segments(std::size_t each, int n) {
    Segments s;
    s.offset.resize(n);
    s.count.assign(n, each);
    for (int i = 0; i < n; ++i) s.offset[i] = each * std::size_t(i);
    s.max_count = each;
    return s;
}

std::size_t chunk_elems(DType dtype) {
    return std::max<std::size_t>(1, Tuning::get().chunk_bytes / dtype_size(dtype));
}

std::size_t chunks_of(std::size_t count, std::size_t per_chunk) { return (count + per_chunk - 1) / per_chunk; }

std::uint32_t ring_step_tag(std::uint32_t base, int k, std::size_t j, std::size_t chunks_per_step) {
    return std::uint32_t(base + std::size_t(k) * chunks_per_step + j);
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

void RingReduceScatter::run() {
    Exchange &x = *ex;
    const Call &call = x.call();
    const int n = x.size(), r = x.rank();
    const int next = mod(r + 1, n), prev = mod(r - 1, n);
    const DType dtype = call.dtype;
    const ReduceOp op = accumulate_op(call.op);
    const std::size_t elem = dtype_size(dtype);
    const std::size_t per = chunk_elems(dtype);
    const std::size_t cps = chunks_of(segs->max_count, per);
    const int steps = n - 1;
    // Incoming chunks land in a few chunk-sized slots reused round-robin (cache-resident, so the
    // copy in and the reduction that reads it stay out of DRAM); the receive for the chunk
    // `slots` places ahead is posted once a slot has been reduced.
    const std::size_t nslots = std::max<std::size_t>(2, Tuning::get().recv_slots);
    unsigned char *slot_buf = x.comm().scratch(0, nslots * per * elem);
    auto s_send = [&](int k) { return mod(r - k + shift, n); };
    auto s_recv = [&](int k) { return mod(r - k - 1 + shift, n); };
    auto src = [&](int k, int s) -> const unsigned char * {
        return k == 0 ? in + segs->offset[s] * elem : dst(k - 1, s);
    };
    std::vector<std::pair<int, std::size_t>> order; // every incoming chunk (step, index), in order
    for (int k = 0; k < steps; ++k)
        for (std::size_t j = 0; j < chunks_of(segs->count[s_recv(k)], per); ++j) order.emplace_back(k, j);
    std::vector<Request *> recvs(order.size(), nullptr);
    std::vector<std::vector<Request *>> sends(steps);
    auto post_recv = [&](std::size_t q) {
        if (q >= order.size()) return;
        const int k = order[q].first;
        const std::size_t j = order[q].second, off = j * per, c = segs->count[s_recv(k)];
        recvs[q] = &x.recv(prev, ring_step_tag(step_base, k, j, cps), slot_buf + (q % nslots) * per * elem,
                           std::min(per, c - off) * elem);
    };
    auto post_send = [&](int k, std::size_t j) {
        const int s = s_send(k);
        const std::size_t off = j * per, c = segs->count[s];
        if (off >= c) return;
        sends[k].push_back(
            &x.send(next, ring_step_tag(step_base, k, j, cps), src(k, s) + off * elem, std::min(per, c - off) * elem));
    };
    for (std::size_t q = 0; q < nslots; ++q) post_recv(q);
    for (std::size_t j = 0; j < chunks_of(segs->count[s_send(0)], per); ++j) post_send(0, j);
    std::size_t q = 0;
    for (int k = 0; k < steps; ++k) {
        if (double_buffered && k >= 1)
            for (Request *sq : sends[k - 1]) x.wait(*sq); // step k-1 read the buffer step k writes
        const int s = s_recv(k);
        const std::size_t c = segs->count[s];
        unsigned char *out = dst(k, s);
        const unsigned char *mine = in + segs->offset[s] * elem;
        for (std::size_t j = 0, off = 0; off < c; ++j, off += per, ++q) {
            x.wait(*recvs[q]);
            const std::size_t m = std::min(per, c - off);
            const void *inputs[2] = {slot_buf + (q % nslots) * per * elem, mine + off * elem};
            reduce_inputs(inputs, 2, out + off * elem, m, dtype, op);
            post_recv(q + nslots);
            if (k + 1 < steps)
                post_send(k + 1, j);
            else if (on_final_chunk)
                on_final_chunk(off, m);
        }
    }
    for (auto &list : sends)
        for (Request *q : list) x.wait(*q);
}

void ring_allgather_segments(Exchange &x, const Segments &segs, unsigned char *base, int shift, std::uint32_t step_base,
                             bool first_sends_posted) {
    const int n = x.size(), r = x.rank();
    const int next = mod(r + 1, n), prev = mod(r - 1, n);
    const std::size_t elem = dtype_size(x.call().dtype);
    const std::size_t per = chunk_elems(x.call().dtype);
    const std::size_t cps = chunks_of(segs.max_count, per);
    const int steps = n - 1;
    std::vector<std::vector<Request *>> recvs(steps);
    for (int k = 0; k < steps; ++k) {
        const int s = mod(r + shift - k - 1, n);
        const std::size_t c = segs.count[s];
        for (std::size_t j = 0, off = 0; off < c; ++j, off += per)
            recvs[k].push_back(&x.recv(prev, ring_step_tag(step_base, k, j, cps), base + (segs.offset[s] + off) * elem,
                                       std::min(per, c - off) * elem));
    }
    if (!first_sends_posted) {
        const int s = mod(r + shift, n);
        const std::size_t c = segs.count[s];
        for (std::size_t j = 0, off = 0; off < c; ++j, off += per)
            x.send(next, ring_step_tag(step_base, 0, j, cps), base + (segs.offset[s] + off) * elem,
                   std::min(per, c - off) * elem);
    }
    for (int k = 0; k < steps; ++k) {
        const int s = mod(r + shift - k - 1, n);
        const std::size_t c = segs.count[s];
        for (std::size_t j = 0; j < recvs[k].size(); ++j) {
            x.wait(*recvs[k][j]);
            if (k + 1 < steps) {
                const std::size_t off = j * per;
                x.send(next, ring_step_tag(step_base, k + 1, j, cps), base + (segs.offset[s] + off) * elem,
                       std::min(per, c - off) * elem);
            }
        }
    }
}

} // namespace shardopt::ucx
