// libFuzzer harness: the input is a program of C ABI calls on a few handle slots (an
// in-process communicator of one rank, parameter sets, optimizers, pending works), with
// arguments taken from the following bytes, NULL handles and out-of-range values included.
// Options structs come from _init or zeroed (zero means default), with random switches, memory
// spaces, field_mask bits and fields set without their bit. Checks: no crash, no sanitizer
// report, no leak (every handle is destroyed at the end), every failing call returns a known
// status with a non-empty shardopt_last_error_message().
#define SHARDOPT_EXPERIMENTAL // shardopt_comm_create_inprocess_member
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "shardopt.h"

namespace {

struct Input {
    const std::uint8_t *p;
    std::size_t n;
    std::uint8_t byte() {
        if (!n) return 0;
        --n;
        return *p++;
    }
    std::uint32_t u16() { return std::uint32_t(byte()) | (std::uint32_t(byte()) << 8); }
};

void check(shardopt_status s) {
    if (s == SHARDOPT_OK) return;
    if (int(s) < 0 || int(s) > int(SHARDOPT_ERR_INTERNAL)) std::abort();
    if (s == SHARDOPT_ERR_INTERNAL) std::abort(); // a bug by definition
    const char *m = shardopt_last_error_message();
    if (!m || !*m) std::abort();
}

constexpr int kSlots = 2;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    Input in{data, size};
    shardopt_comm comm[kSlots] = {};
    shardopt_params params[kSlots] = {};
    shardopt_optimizer opt[kSlots] = {};
    shardopt_work work[kSlots] = {};
    std::vector<double> buf_a(64), buf_b(64 * 4);
    for (int op = 0; op < 64 && in.n; ++op) {
        const std::uint8_t code = in.byte();
        const int s = in.byte() % kSlots;
        const bool null_handle = (code & 0x80) != 0; // high bit: pass NULL instead of the slot
        switch (code % 23) {
        case 0:
            if (!comm[s]) check(shardopt_comm_create_inprocess(1, &comm[s]));
            break;
        case 1:
            // Works must finish before their communicator goes away.
            if (work[s]) {
                check(shardopt_work_wait(work[s]));
                shardopt_work_destroy(work[s]);
                work[s] = nullptr;
            }
            check(shardopt_comm_destroy(comm[s]));
            comm[s] = nullptr;
            break;
        case 2:
            if (!params[s]) check(shardopt_params_create(shardopt_dtype(in.byte() % 9), in.u16(), &params[s]));
            break;
        case 3: {
            char name[4] = {char('a' + in.byte() % 4), 0, 0, 0};
            int index = -1;
            check(shardopt_params_add(null_handle ? nullptr : params[s], name, in.byte() % 40, in.byte() & 1, &index));
            break;
        }
        case 4: check(shardopt_params_end_bucket(null_handle ? nullptr : params[s])); break;
        case 5: {
            if (opt[s]) break;
            const std::uint8_t how = in.byte();
            shardopt_optimizer_options o;
            shardopt_sharding_options so;
            if (how & 1) { // explicit defaults
                shardopt_optimizer_options_defaults(shardopt_optimizer_kind(in.byte() % 7), &o);
                shardopt_sharding_options_init(&so);
            } else { // zeroed: the defaults, with some bits of field_mask (an unknown one at times)
                std::memset(&o, 0, sizeof o);
                std::memset(&so, 0, sizeof so);
                o.struct_size = sizeof o;
                so.struct_size = sizeof so;
                o.field_mask = in.u16() | (in.byte() == 0xff ? std::uint64_t(1) << 40 : 0);
                o.kind = shardopt_optimizer_kind(in.byte() % 7);
            }
            if (how & 2) o.lr = (in.byte() % 4) * 0.1 - 0.05; // without its bit at times
            if (how & 4) o.momentum = (in.byte() % 3) * 0.5;
            so.strategy = shardopt_strategy(in.byte() % 7);
            so.gradient_accumulation_steps = int(in.byte() % 4) - 1;
            so.skip_nonfinite = shardopt_switch(in.byte() % 4); // 3: not a switch
            so.fsdp_prefetch = shardopt_switch(in.byte() % 4);
            so.overlap_param_gather = shardopt_switch(in.byte() % 4);
            so.memory = shardopt_memory_space(in.byte() % 3); // cuda: refused on inprocess; 2: invalid
            so.update_threads = int(in.byte() % 4) - 1;
            so.local_sgd_period = int(in.byte() % 3) - 1;
            if (how & 8) so.struct_size = offsetof(shardopt_sharding_options, memory); // an older caller
            check(shardopt_optimizer_create(null_handle ? nullptr : comm[s], params[s], &o, &so, nullptr, &opt[s]));
            break;
        }
        case 6:
            check(shardopt_optimizer_destroy(opt[s]));
            opt[s] = nullptr;
            break;
        case 7: check(shardopt_optimizer_zero_grad(null_handle ? nullptr : opt[s])); break;
        case 8: {
            void *g = nullptr;
            size_t count = 0;
            const int b = int(in.byte() % 4) - 1;
            const shardopt_status st = shardopt_optimizer_bucket_grad(opt[s], b, &g, &count);
            check(st);
            if (st == SHARDOPT_OK && g && count) std::memset(g, 0, count); // writable (ASan checks)
            break;
        }
        case 9: check(shardopt_optimizer_grad_ready(opt[s], int(in.byte() % 4) - 1)); break;
        case 10: {
            shardopt_step_result r;
            std::memset(&r, 0, sizeof r);
            r.struct_size = (in.byte() & 1) ? sizeof r : 0;
            check(shardopt_optimizer_step(opt[s], &r));
            break;
        }
        case 11: {
            const std::size_t count = in.byte() % 40;
            check(shardopt_allreduce(null_handle ? nullptr : comm[s], buf_a.data(), buf_b.data(), count,
                                     shardopt_dtype(in.byte() % 9), shardopt_reduce_op(in.byte() % 7)));
            break;
        }
        case 12:
            check(shardopt_broadcast(comm[s], buf_a.data(), in.byte() % 40, shardopt_dtype(in.byte() % 8),
                                     int(in.byte() % 3) - 1));
            break;
        case 13:
            check(shardopt_allgather(comm[s], buf_a.data(), buf_b.data(), in.byte() % 40,
                                     shardopt_dtype(in.byte() % 8)));
            break;
        case 14: check(shardopt_comm_set_timeout(comm[s], std::int64_t(in.byte()) - 8)); break;
        case 15: check(shardopt_comm_abort(comm[s], (in.byte() & 1) ? "fuzz" : nullptr)); break;
        case 16: {
            size_t count = 0;
            if (opt[s] && shardopt_optimizer_element_count(opt[s], &count, nullptr) == SHARDOPT_OK) {
                std::vector<double> packed(count + 1);
                const size_t ask = (in.byte() & 1) ? count : count + 1;
                check(shardopt_optimizer_get_parameters(opt[s], packed.data(), ask));
                check(shardopt_optimizer_set_parameters(opt[s], packed.data(), ask));
            } else {
                check(shardopt_optimizer_get_parameters(opt[s], nullptr, 0));
            }
            break;
        }
        case 17:
            check(shardopt_params_destroy(params[s]));
            params[s] = nullptr;
            break;
        case 18:
            if (!work[s])
                check(shardopt_allreduce_async(comm[s], buf_a.data(), buf_a.data(), in.byte() % 40,
                                               shardopt_dtype(in.byte() % 8), shardopt_reduce_op(in.byte() % 5),
                                               &work[s]));
            break;
        case 19:
            if (work[s]) {
                int done = 0;
                check(shardopt_work_test(work[s], &done));
                if (in.byte() & 1) check(shardopt_work_wait(work[s]));
                check(shardopt_work_destroy(work[s]));
                work[s] = nullptr;
            } else {
                check(shardopt_work_wait(nullptr));
            }
            break;
        case 20: {
            shardopt_comm child = nullptr;
            check(shardopt_comm_split(comm[s], int(in.byte() % 3) - 1, in.byte(), &child));
            shardopt_comm_destroy(child);
            break;
        }
        case 21: {
            int rank = -1, sz = -1;
            check(shardopt_comm_rank(null_handle ? nullptr : comm[s], &rank));
            check(shardopt_comm_size(comm[s], null_handle ? nullptr : &sz));
            break;
        }
        case 22: {
            // In-process groups by name: a handle of a group of one goes into an empty slot (a
            // complete group, safe to use); others are destroyed at once (their peers may never
            // be claimed, so a collective on them would wait). Two ids keep the registry small.
            const char *ids[2] = {"fuzz-a", "fuzz-b"};
            const int size = 1 + in.byte() % 3, rank = int(in.byte() % 4) - 1;
            shardopt_comm c = nullptr;
            check(shardopt_comm_create_inprocess_member(null_handle ? nullptr : ids[in.byte() & 1], rank, size, &c));
            if (c && size == 1 && !comm[s])
                comm[s] = c;
            else
                check(shardopt_comm_destroy(c));
            break;
        }
        }
    }
    for (int s = 0; s < kSlots; ++s) {
        if (work[s]) {
            shardopt_work_wait(work[s]);
            shardopt_work_destroy(work[s]);
        }
        shardopt_optimizer_destroy(opt[s]);
        shardopt_params_destroy(params[s]);
        shardopt_comm_destroy(comm[s]);
    }
    return 0;
}
