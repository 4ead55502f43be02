#include "block_executor.hpp"

#include <sys/mman.h>

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <vector>

namespace cuda_standin {
namespace {

constexpr std::size_t kStackBytes = 64 * 1024;
constexpr int kWarp = 32;

namespace ctx = boost::context;

struct Fiber {
    ctx::fiber context; // the CUDA thread, suspended (or not yet started)
    ctx::fiber caller;  // the scheduler, while the thread runs
    uint3 index;
    int warp = 0;
    bool done = false;
};

struct Barrier {
    int live = 0, arrived = 0;
    uint64_t generation = 0;
    // Called by an arriving or finishing thread: releases the waiters once all live ones arrived.
    bool release_if_complete() {
        if (arrived == 0 || arrived < live) return false;
        arrived = 0;
        ++generation;
        return true;
    }
};

struct Warp {
    Barrier barrier;
    uint64_t slots[kWarp] = {};
};

// One grid in flight per OS thread (a stream's worker runs its operations one at a time).
struct GridState {
    dim3 grid, block;
    uint3 block_index{};
    const std::function<void()> *body = nullptr;
    std::vector<Fiber> fibers;
    Barrier barrier;
    std::vector<Warp> warps;
    Fiber *current = nullptr;
};

// Fiber stacks carved from one mapping per OS thread, reused by every block it runs (a block
// of 1024 threads would otherwise map 1024 stacks per launch).
struct PooledStack {
    char *base;
    ctx::stack_context allocate() {
        ctx::stack_context sc;
        sc.size = kStackBytes;
        sc.sp = base + kStackBytes; // stacks grow down
        return sc;
    }
    void deallocate(ctx::stack_context &) noexcept {}
};

thread_local GridState *state = nullptr;

void yield_to_scheduler() {
    Fiber &f = *state->current;
    f.caller = std::move(f.caller).resume();
}

// Waits at `b` until every live thread of its scope arrived.
void wait_at(Barrier &b) {
    const uint64_t generation = b.generation;
    ++b.arrived;
    if (b.release_if_complete()) return;
    while (b.generation == generation) yield_to_scheduler();
}

// Runs one CUDA thread to its end, then releases the barriers it no longer takes part in.
void run_thread(GridState &s, Fiber &f) {
    (*s.body)();
    f.done = true;
    --s.barrier.live;
    s.barrier.release_if_complete();
    Barrier &w = s.warps[std::size_t(f.warp)].barrier;
    --w.live;
    w.release_if_complete();
}

char *stacks_for(std::size_t threads) {
    thread_local char *stacks = nullptr;
    thread_local std::size_t count = 0;
    if (count < threads) {
        if (stacks) munmap(stacks, count * kStackBytes);
        void *p = mmap(nullptr, threads * kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED) {
            std::fprintf(stderr, "cuda stand-in: cannot map %zu fiber stacks\n", threads);
            std::abort();
        }
        stacks = static_cast<char *>(p);
        count = threads;
    }
    return stacks;
}

void run_block(GridState &s) {
    const unsigned threads = s.block.x * s.block.y * s.block.z;
    char *stacks = stacks_for(threads);
    s.fibers.clear();
    s.fibers.resize(threads);
    s.barrier = Barrier{};
    s.barrier.live = int(threads);
    s.warps.assign((threads + kWarp - 1) / kWarp, Warp{});
    for (unsigned t = 0; t < threads; ++t) {
        Fiber &f = s.fibers[t];
        f.index = uint3{t % s.block.x, t / s.block.x % s.block.y, t / (s.block.x * s.block.y)};
        f.warp = int(t / kWarp);
        s.warps[std::size_t(f.warp)].barrier.live++;
        GridState *grid = &s;
        f.context = ctx::fiber(std::allocator_arg, PooledStack{stacks + std::size_t(t) * kStackBytes},
                               [grid, &f](ctx::fiber &&caller) {
                                   f.caller = std::move(caller);
                                   run_thread(*grid, f);
                                   return std::move(f.caller);
                               });
    }
    // Round robin until every thread returned; a thread gives up its turn only at a barrier.
    for (bool running = true; running;) {
        running = false;
        for (Fiber &f : s.fibers) {
            if (f.done) continue;
            s.current = &f;
            f.context = std::move(f.context).resume();
            running = running || !f.done;
        }
    }
}

} // namespace

const uint3 &thread_index() { return state->current->index; }
const uint3 &block_index() { return state->block_index; }
const dim3 &block_dim() { return state->block; }
const dim3 &grid_dim() { return state->grid; }

void run_grid(dim3 grid, dim3 block, const std::function<void()> &body) {
    GridState s;
    s.grid = grid;
    s.block = block;
    s.body = &body;
    GridState *outer = state;
    state = &s;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                s.block_index = uint3{x, y, z};
                run_block(s);
            }
    state = outer;
}

void sync_block() { wait_at(state->barrier); }

uint64_t shuffle_down(uint64_t bits, int delta) {
    GridState &s = *state;
    Fiber &f = *s.current;
    const unsigned linear = f.index.x + f.index.y * s.block.x + f.index.z * s.block.x * s.block.y;
    const int lane = int(linear % kWarp);
    Warp &w = s.warps[std::size_t(f.warp)];
    w.slots[lane] = bits;
    wait_at(w.barrier);
    const int from = lane + delta;
    const unsigned lanes_here = std::min<unsigned>(kWarp, unsigned(s.fibers.size()) - unsigned(f.warp) * kWarp);
    const uint64_t result = (from < int(lanes_here)) ? w.slots[from] : bits;
    wait_at(w.barrier); // nobody overwrites a slot before every lane read it
    return result;
}

} // namespace cuda_standin
