#include "block_executor.hpp"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <vector>

namespace cuda_standin {
namespace {

constexpr std::size_t kStackBytes = 64 * 1024;
constexpr int kWarp = 32;

struct Fiber {
    ucontext_t context;
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
    ucontext_t scheduler;
    char *stacks = nullptr;
    std::size_t stack_count = 0;
};

thread_local GridState *state = nullptr;

void yield_to_scheduler() { swapcontext(&state->current->context, &state->scheduler); }

// Waits at `b` until every live thread of its scope arrived.
void wait_at(Barrier &b) {
    const uint64_t generation = b.generation;
    ++b.arrived;
    if (b.release_if_complete()) return;
    while (b.generation == generation) yield_to_scheduler();
}

void fiber_entry() {
    GridState &s = *state;
    (*s.body)();
    Fiber &f = *s.current;
    f.done = true;
    --s.barrier.live;
    s.barrier.release_if_complete();
    Barrier &w = s.warps[std::size_t(f.warp)].barrier;
    --w.live;
    w.release_if_complete();
    // Returning resumes the scheduler through uc_link.
}

char *stacks_for(GridState &s, std::size_t threads) {
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
    (void)s;
    return stacks;
}

void run_block(GridState &s) {
    const unsigned threads = s.block.x * s.block.y * s.block.z;
    char *stacks = stacks_for(s, threads);
    s.fibers.assign(threads, Fiber{});
    s.barrier = Barrier{};
    s.barrier.live = int(threads);
    s.warps.assign((threads + kWarp - 1) / kWarp, Warp{});
    for (unsigned t = 0; t < threads; ++t) {
        Fiber &f = s.fibers[t];
        f.index = uint3{t % s.block.x, t / s.block.x % s.block.y, t / (s.block.x * s.block.y)};
        f.warp = int(t / kWarp);
        s.warps[std::size_t(f.warp)].barrier.live++;
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = stacks + std::size_t(t) * kStackBytes;
        f.context.uc_stack.ss_size = kStackBytes;
        f.context.uc_link = &s.scheduler;
        makecontext(&f.context, fiber_entry, 0);
    }
    // Round robin until every thread returned; a thread gives up its turn only at a barrier.
    for (bool running = true; running;) {
        running = false;
        for (Fiber &f : s.fibers) {
            if (f.done) continue;
            s.current = &f;
            swapcontext(&s.scheduler, &f.context);
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
