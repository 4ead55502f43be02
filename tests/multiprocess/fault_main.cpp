// Fault-injection helper for tests/multiprocess/fault_test.py. Modes:
//   join              create the communicator from the environment and barrier; on error print
//                     "ERROR <code>: <message>" and exit 3, else print "JOINED" and exit 0.
//   peer-kill VICTIM  every rank loops 4 MiB allreduces; rank VICTIM SIGKILLs itself after
//                     300 ms. Survivors must fail with peer_lost naming "rank VICTIM" within the
//                     communicator timeout: they print "OK <seconds> <message>" and exit 0, or
//                     "BAD ..." and exit 1.
//   train STEPS [VICTIM KILL_STEP KILL_DELAY_US]
//                     every rank trains a small ZeRO-2 model (SGD on a quadratic whose optimum
//                     is known) for STEPS steps, then barriers. With a victim, that rank
//                     SIGKILLs itself KILL_DELAY_US after starting step KILL_STEP (mid-step, often
//                     mid-collective; it never passes the final barrier). Survivors print
//                     "LOST <secs since the kill> <code>: <message>" and exit 0 when the error
//                     names the victim, or "BAD ..." and exit 1. Without a victim every rank
//                     checks its parameters against the closed form and prints "TRAINED" (exit
//                     0) or "BAD ..." (exit 1). SHARDOPT_FAULT_STEP_SLEEP_MS slows each step.
//                     SHARDOPT_FAULT_CHECKPOINT_DIR: save there every 3 steps, in the form
//                     SHARDOPT_FAULT_CHECKPOINT_FORM (sharded, or consolidated). KILL_STEP "save":
//                     the victim SIGKILLs itself inside its KILL_DELAY_US-th save instead, with
//                     its part of the files written and nothing published (the test hook
//                     SHARDOPT_CHECKPOINT_TEST_KILL_AT).
//   peer-exit VICTIM  like peer-kill, but rank VICTIM runs 5 allreduces, then closes its
//                     communicator cleanly and stays alive 3 s ("LEFT", exit 0); the others
//                     must fail with peer_lost naming it ("left the job"), not time out.
//   stall KIND BYTES VICTIM [resume]
//                     every rank loops KIND (allreduce, reduce_scatter or allgather) collectives of
//                     BYTES per rank (the arena for small ones, CMA for large ones); rank VICTIM
//                     runs with SHARDOPT_TEST_STOP_AT (set by the test) and is SIGSTOPped inside
//                     one of them. Survivors must fail with ErrorCode::timeout naming rank VICTIM,
//                     the failing call lasting from 0.9 times the communicator timeout to 1 s
//                     past it: "OK <secs> #<iteration> <message>" (else "BAD ...").
//                     Then each fills its output with a sentinel, waits (3 s with resume, while
//                     the test SIGCONTs the victim; else 1 s) and checks that nobody wrote into it
//                     after it left: "UNTOUCHED" (else "BAD ..."). Exit code 3 (a rank whose
//                     collective failed; shardopt-run then kills the stopped victim), 0 with
//                     resume. A resumed victim must fail too, in the collective it was stopped
//                     in (the test checks the iteration): "RESUMED-FAILED #<iteration> <code>:
//                     <message>", exit 0.
//   attach-stall      create the communicator; rank 0 runs with SHARDOPT_TEST_STOP_AT=attach:0[:kill]
//                     (set by the test) and stops (dies) after offering the arena: the others must
//                     fail with timeout (peer_lost) naming rank 0 ("NOARENA <secs> <code>:
//                     <message>", exit 3), having removed the arena's name from /dev/shm (the
//                     test checks).
//   shm-used          create the communicator, barrier, then print "SHMUSED <bytes>": what
//                     /dev/shm holds while every rank has the arena mapped (its name is
//                     unlinked by then, its memory still counted); barrier again.
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using Clock = std::chrono::steady_clock;

static int join_mode() {
    try {
        auto comm = create_communicator_from_env("ucx");
        comm->barrier();
        std::printf("JOINED rank %d of %d\n", comm->rank(), comm->size());
        return 0;
    } catch (const Error &e) {
        std::printf("ERROR %s: %s\n", error_code_name(e.code()), e.what());
        return 3;
    }
}

static int peer_kill_mode(int victim) {
    auto comm = create_communicator_from_env("ucx");
    comm->barrier();
    if (comm->rank() == victim) {
        std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            raise(SIGKILL);
        }).detach();
    }
    std::vector<float> buf(1 << 20, 1.0f);
    const auto kill_time = Clock::now() + std::chrono::milliseconds(300);
    try {
        for (;;) comm->allreduce(buf.data(), buf.size(), ReduceOp::sum);
    } catch (const Error &e) {
        const double secs = std::chrono::duration<double>(Clock::now() - kill_time).count();
        const std::string what = e.what();
        const double limit = double(comm->timeout().count()) / 1000.0;
        if (e.code() == ErrorCode::peer_lost && what.find("rank " + std::to_string(victim)) != std::string::npos &&
            secs < limit) {
            std::printf("OK %.2f %s\n", secs, what.c_str());
            return 0;
        }
        std::printf("BAD after %.2f s (limit %.1f): %s: %s\n", secs, limit, error_code_name(e.code()), what.c_str());
        return 1;
    }
}

// The model train mode trains: SGD with lr 0.25 under ZeRO-2, small buckets so each step runs
// several collectives.
static std::unique_ptr<ShardedOptimizer> training_optimizer(const CommunicatorPtr &comm) {
    ParameterSet layout(DType::f32, 8 << 10);
    layout.add("w1", 3000);
    layout.add("w2", 2000);
    layout.add("w3", 1000);
    OptimizerOptions sgd;
    sgd.kind = OptimizerKind::sgd;
    sgd.lr = 0.25;
    ShardingOptions so;
    so.strategy = Strategy::zero2;
    return ShardedOptimizer::create(comm, layout, sgd, so);
}

// Largest distance of the parameters from the closed form after `steps` steps (see below).
static double closed_form_error(ShardedOptimizer &opt, double lr, std::int64_t steps, int size) {
    const auto &lay = opt.layout();
    const float *w = static_cast<const float *>(opt.parameters());
    const double decay = std::pow(1.0 - lr, double(steps));
    double worst = 0;
    for (int t = 0; t < lay.tensor_count(); ++t) {
        const auto &tl = lay.tensor(t);
        for (std::size_t i = 0; i < tl.count; ++i) {
            const double target = double((tl.offset + i) % 7) + (size - 1) / 2.0;
            worst = std::max(worst, std::fabs(w[tl.offset + i] - target * (1.0 - decay)));
        }
    }
    return worst;
}

// Loads the checkpoint in `dir` into a fresh job and checks it against the closed form at the
// step it was saved: "CHECKPOINT rank R step N ..." and exit 0, or "BAD ..." and exit 1.
static int verify_checkpoint_mode(const char *dir) {
    auto comm = create_communicator_from_env("ucx");
    auto opt = training_optimizer(comm);
    try {
        opt->load(dir);
    } catch (const Error &e) {
        std::printf("BAD rank %d: the last checkpoint does not load: %s\n", comm->rank(), e.what());
        return 1;
    }
    const double worst = closed_form_error(*opt, opt->optimizer_options().lr, opt->step_count(), comm->size());
    const bool ok = opt->step_count() > 0 && worst <= 1e-3;
    std::printf("%s rank %d step %lld max error %g\n", ok ? "CHECKPOINT" : "BAD checkpoint", comm->rank(),
                (long long)opt->step_count(), worst);
    return ok ? 0 : 1;
}

// Rank r's loss is 0.5 * |w - t_r|^2 with t_r[i] = (i % 7) + r: the averaged gradient is
// w - mean_r(t_r), so SGD with lr from w = 0 gives w_k = T * (1 - (1 - lr)^k) exactly in reals.
// A timeout lists every rank that had not arrived ("ranks never arrived: 0, 2"). When a link
// goes down, a survivor may also be waiting for a live rank that is itself stuck timing out in
// the collective before, so the lost rank can be anywhere in that list.
static bool listed_as_missing(const std::string &what, int victim) {
    const std::string tag = "never arrived: ";
    const auto at = what.find(tag);
    if (at == std::string::npos) return false;
    std::size_t pos = at + tag.size();
    for (;;) {
        std::size_t used = 0;
        int listed = -1;
        try {
            listed = std::stoi(what.substr(pos), &used);
        } catch (const std::exception &) {
            return false;
        }
        if (listed == victim) return true;
        pos += used;
        if (what.compare(pos, 2, ", ") != 0) return false;
        pos += 2;
    }
}

static int train_mode(int steps, int victim, int kill_step, int kill_delay_us) {
    CommunicatorPtr comm;
    try {
        comm = create_communicator_from_env("ucx");
    } catch (const Error &e) { // the victim can die while the others still connect to it
        const std::string what = e.what();
        const bool named = victim >= 0 && what.find("rank " + std::to_string(victim)) != std::string::npos;
        std::printf("%s %s: %s\n", named ? "LOST" : "BAD (at startup)", error_code_name(e.code()), what.c_str());
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        return named ? 0 : 1;
    }
    const int rank = comm->rank(), size = comm->size();
    auto opt = training_optimizer(comm);
    const double lr = opt->optimizer_options().lr;
    const auto &lay = opt->layout();
    int sleep_ms = 0;
    if (const char *e = std::getenv("SHARDOPT_FAULT_STEP_SLEEP_MS")) sleep_ms = std::atoi(e);
    const char *checkpoint_dir = std::getenv("SHARDOPT_FAULT_CHECKPOINT_DIR"); // save every 3 steps
    const char *form_name = std::getenv("SHARDOPT_FAULT_CHECKPOINT_FORM");
    const CheckpointForm form =
        form_name && std::string(form_name) == "consolidated" ? CheckpointForm::consolidated : CheckpointForm::sharded;
    if (rank == victim && kill_step == -2) // killed inside its kill_delay_us-th save
        ::setenv("SHARDOPT_CHECKPOINT_TEST_KILL_AT", std::to_string(kill_delay_us).c_str(), 1);
    try {
        for (int step = 0; step < steps; ++step) {
            if (rank == victim && step == kill_step && kill_delay_us >= 0) {
                std::thread([kill_delay_us] {
                    std::this_thread::sleep_for(std::chrono::microseconds(kill_delay_us));
                    raise(SIGKILL);
                }).detach();
            }
            const float *w = static_cast<const float *>(opt->parameters());
            opt->zero_grad();
            for (int b = 0; b < lay.bucket_count(); ++b) {
                opt->bucket_grad(b);
                const auto &bl = lay.bucket(b);
                for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
                    const auto &tl = lay.tensor(t);
                    float *g = static_cast<float *>(opt->grad(t));
                    for (std::size_t i = 0; i < tl.count; ++i)
                        g[i] = w[tl.offset + i] - float(int((tl.offset + i) % 7) + rank);
                }
                opt->grad_ready(b);
            }
            opt->step();
            if (checkpoint_dir && (step + 1) % 3 == 0) opt->save(checkpoint_dir, form); // collective
            if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
        }
        if (rank == victim && kill_step >= 0) {
            // Finished before the kill fired: wait for it, never reaching the final barrier.
            std::this_thread::sleep_for(std::chrono::seconds(30));
            return 5;
        }
        comm->barrier();
    } catch (const Error &e) {
        if (rank == victim && kill_step < 0) { // cut off (link down), not killed: any clean error
            std::printf("ISOLATED %s: %s\n", error_code_name(e.code()), e.what());
            return 0;
        }
        if (victim < 0 || rank == victim) {
            std::printf("BAD rank %d failed: %s: %s\n", rank, error_code_name(e.code()), e.what());
            return 1;
        }
        // Survivors: the error must name the lost rank, within the communicator timeout.
        const std::string what = e.what();
        const bool named = what.find("rank " + std::to_string(victim) + " ") != std::string::npos ||
                           what.find("rank " + std::to_string(victim) + ")") != std::string::npos ||
                           what.find("rank(s) " + std::to_string(victim)) != std::string::npos ||
                           listed_as_missing(what, victim);
        std::printf("%s %s: %s\n", named ? "LOST" : "BAD (lost rank not named)", error_code_name(e.code()),
                    what.c_str());
        std::fflush(stdout);
        // Stay up a moment, as a real process would while it reports: a survivor that exits at
        // once is itself "lost" to the others, which then (correctly) report that instead.
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        return named ? 0 : 1;
    }
    if (victim >= 0) {
        std::printf("BAD rank %d finished although rank %d was killed\n", rank, victim);
        return 1;
    }
    const double worst = closed_form_error(*opt, lr, steps, size);
    if (worst > 1e-3) {
        std::printf("BAD rank %d parameters off by %g after %d steps\n", rank, worst, steps);
        return 1;
    }
    std::printf("TRAINED rank %d %d steps max error %g\n", rank, steps, worst);
    return 0;
}

static int peer_exit_mode(int victim) {
    auto comm = create_communicator_from_env("ucx");
    comm->barrier();
    std::vector<float> buf(1 << 20, 1.0f);
    if (comm->rank() == victim) {
        for (int i = 0; i < 5; ++i) comm->allreduce(buf.data(), buf.size(), ReduceOp::sum);
        comm.reset();
        std::printf("LEFT\n");
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::seconds(3));
        return 0;
    }
    const auto start = Clock::now();
    try {
        for (;;) comm->allreduce(buf.data(), buf.size(), ReduceOp::sum);
    } catch (const Error &e) {
        const double secs = std::chrono::duration<double>(Clock::now() - start).count();
        const std::string what = e.what();
        if (e.code() == ErrorCode::peer_lost && what.find("rank " + std::to_string(victim)) != std::string::npos &&
            secs < 2.5) {
            std::printf("OK %.2f %s\n", secs, what.c_str());
            return 0;
        }
        std::printf("BAD after %.2f s: %s: %s\n", secs, error_code_name(e.code()), what.c_str());
        return 1;
    }
}

static bool names_rank(const std::string &what, int r) {
    const std::string s = std::to_string(r);
    for (const std::string &form : {"rank " + s + " ", "rank " + s + ")", "rank(s) " + s, "never arrived: " + s})
        if (what.find(form) != std::string::npos) return true;
    return false;
}

static int stall_mode(const std::string &kind, std::size_t bytes, int victim, bool resume) {
    auto comm = create_communicator_from_env("ucx");
    const int rank = comm->rank(), n = comm->size();
    const std::size_t count = bytes / sizeof(float);
    const std::size_t in = kind == "reduce_scatter" ? count * std::size_t(n) : count;
    const std::size_t out = kind == "allgather" ? count * std::size_t(n) : count;
    if (kind != "allreduce" && kind != "reduce_scatter" && kind != "allgather") {
        std::printf("BAD unknown collective %s\n", kind.c_str());
        return 2;
    }
    std::vector<float> send(in, float(rank + 1)), recv(out, 0.0f);
    const double limit = double(comm->timeout().count()) / 1000.0;
    for (int i = 0; i < 100; ++i) {
        const auto t0 = Clock::now();
        try {
            if (kind == "allreduce")
                comm->allreduce(send.data(), recv.data(), count, DType::f32, ReduceOp::sum);
            else if (kind == "reduce_scatter")
                comm->reduce_scatter(send.data(), recv.data(), count, DType::f32, ReduceOp::sum);
            else
                comm->allgather(send.data(), recv.data(), count, DType::f32);
        } catch (const Error &e) {
            const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
            const std::string what = e.what();
            if (rank == victim) { // only after SIGCONT: the others have given up on it
                std::printf("RESUMED-FAILED #%d %s: %s\n", i, error_code_name(e.code()), what.c_str());
                return 0;
            }
            const bool ok = e.code() == ErrorCode::timeout && names_rank(what, victim) && secs >= 0.9 * limit &&
                            secs < limit + 1.0;
            std::printf("%s %.2f #%d %s: %s\n", ok ? "OK" : "BAD", secs, i, error_code_name(e.code()), what.c_str());
            std::fflush(stdout);
            // The buffers stay allocated, as a caller's would be reused: nobody may write into
            // them any more (a stalled peer that resumes must notice that this rank left).
            const float sentinel = -12345.5f;
            std::fill(recv.begin(), recv.end(), sentinel);
            std::this_thread::sleep_for(std::chrono::milliseconds(resume ? 3000 : 1000));
            const auto touched = std::count_if(recv.begin(), recv.end(), [&](float v) { return v != sentinel; });
            if (touched)
                std::printf("BAD rank %d: %zu values of its output were written after it left the collective\n",
                            rank, std::size_t(touched));
            else
                std::printf("UNTOUCHED rank %d\n", rank);
            std::fflush(stdout);
            if (!ok || touched) return 1;
            if (resume) return 0;
            // Exit non-zero, as a real rank would after a failed collective: shardopt-run then
            // kills the rest, the stopped victim included. First wait out one more timeout: a
            // survivor that entered the collective later (a loaded machine) must report too.
            std::this_thread::sleep_for(comm->timeout() + std::chrono::milliseconds(500));
            return 3;
        }
    }
    std::printf("BAD rank %d: 100 collectives and no failure\n", rank);
    return 1;
}

static int attach_stall_mode() {
    const auto t0 = Clock::now();
    try {
        auto comm = create_communicator_from_env("ucx");
        std::printf("BAD rank %d joined although rank 0 stopped\n", comm->rank());
        return 1;
    } catch (const Error &e) {
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        const std::string what = e.what();
        const bool ok = (e.code() == ErrorCode::timeout || e.code() == ErrorCode::peer_lost) && names_rank(what, 0);
        std::printf("%s %.2f %s: %s\n", ok ? "NOARENA" : "BAD", secs, error_code_name(e.code()), what.c_str());
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::milliseconds(1000)); // let the others report too
        return ok ? 3 : 1;
    }
}

static int shm_used_mode() {
    auto comm = create_communicator_from_env("ucx");
    comm->barrier();
    struct statvfs st {};
    if (statvfs("/dev/shm", &st) != 0) {
        std::printf("BAD statvfs /dev/shm failed\n");
        return 1;
    }
    std::printf("SHMUSED %llu\n", static_cast<unsigned long long>((st.f_blocks - st.f_bfree) * st.f_frsize));
    std::fflush(stdout);
    comm->barrier(); // nobody unmaps before everyone has looked
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !std::strcmp(argv[1], "train"))
        return train_mode(std::atoi(argv[2]), argc >= 6 ? std::atoi(argv[3]) : -1,
                          argc >= 6 ? (!std::strcmp(argv[4], "save") ? -2 : std::atoi(argv[4])) : 0,
                          argc >= 6 ? std::atoi(argv[5]) : 0);
    if (argc >= 2 && !std::strcmp(argv[1], "join")) return join_mode();
    if (argc >= 3 && !std::strcmp(argv[1], "verify-checkpoint")) return verify_checkpoint_mode(argv[2]);
    if (argc >= 3 && !std::strcmp(argv[1], "peer-kill")) return peer_kill_mode(std::atoi(argv[2]));
    if (argc >= 3 && !std::strcmp(argv[1], "peer-exit")) return peer_exit_mode(std::atoi(argv[2]));
    if (argc >= 5 && !std::strcmp(argv[1], "stall"))
        return stall_mode(argv[2], std::size_t(std::atoll(argv[3])), std::atoi(argv[4]),
                          argc >= 6 && !std::strcmp(argv[5], "resume"));
    if (argc >= 2 && !std::strcmp(argv[1], "attach-stall")) return attach_stall_mode();
    if (argc >= 2 && !std::strcmp(argv[1], "shm-used")) return shm_used_mode();
    std::fprintf(stderr, "usage: %s join | peer-kill VICTIM | peer-exit VICTIM | train STEPS [VICTIM STEP US] | verify-checkpoint DIR | stall KIND BYTES VICTIM [resume] | attach-stall | shm-used\n",
                 argv[0]);
    return 2;
}
