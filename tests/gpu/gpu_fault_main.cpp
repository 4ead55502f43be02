// Fault scenarios for the GPU communicators; every rank of the job runs this (gpu_fault_test.py
// drives it). Each survivor prints "OK <code>: <message>" when it saw the expected error, or
// "FAIL ..." otherwise.
//
//   gpu_fault_main probe N         exit 77 unless at least N CUDA devices are visible, else 0
//   gpu_fault_main staged-kill V   staged backend: rank V SIGKILLs itself after a few
//                                  allreduces; the others must fail with peer_lost
//   gpu_fault_main nccl-skip V     nccl backend: rank V skips an allreduce; the others must fail
//                                  with timeout, and every later call on the aborted
//                                  communicator must fail too (never hang)
#include <cuda_runtime_api.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "shardopt/gpu_comm.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;

namespace {

int devices() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// A device buffer of `count` floats, each 1.
float *device_ones(std::size_t count) {
    void *p = nullptr;
    if (cudaMalloc(&p, count * sizeof(float)) != cudaSuccess) {
        std::printf("FAIL cudaMalloc\n");
        std::exit(1);
    }
    std::vector<float> ones(count, 1.0f);
    (void)cudaMemcpy(p, ones.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    return static_cast<float *>(p);
}

int report(const Error &e, ErrorCode expected, double seconds, double limit) {
    const bool ok = e.code() == expected && seconds < limit;
    std::printf("%s %s after %.1f s: %s\n", ok ? "OK" : "FAIL", error_code_name(e.code()), seconds, e.what());
    return ok ? 0 : 1;
}

int staged_kill(int victim) {
    auto comm = create_communicator_from_env("staged");
    constexpr std::size_t kCount = 1 << 16;
    float *buf = device_ones(kCount);
    const auto limit = std::chrono::duration<double>(comm->timeout()).count();
    for (int i = 0;; ++i) {
        if (comm->rank() == victim && i == 3) raise(SIGKILL);
        const auto t0 = std::chrono::steady_clock::now();
        try {
            comm->allreduce(buf, buf, kCount, DType::f32, ReduceOp::max);
        } catch (const Error &e) {
            const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return report(e, ErrorCode::peer_lost, took, limit);
        }
        if (i > 1000) {
            std::printf("FAIL no error after 1000 allreduces\n");
            return 1;
        }
    }
}

int nccl_skip(int victim) {
    auto comm = create_communicator_from_env("nccl");
    float *buf = device_ones(1024);
    comm->allreduce(buf, buf, 1024, DType::f32, ReduceOp::sum); // everyone: the job works
    if (comm->rank() == victim) {
        // Skip the next allreduce; stay alive past the others' timeout so they see a timeout,
        // not a lost peer; then leave without waiting on them.
        std::this_thread::sleep_for(comm->timeout() * 3);
        comm->abort("test: this rank skipped a collective", ErrorCode::invalid_state);
        std::printf("SKIPPED allreduce as planned\n");
        return 0;
    }
    const double limit = std::chrono::duration<double>(comm->timeout()).count() + 10.0;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        comm->allreduce(buf, buf, 1024, DType::f32, ReduceOp::sum);
        std::printf("FAIL the allreduce a rank skipped completed\n");
        return 1;
    } catch (const Error &e) {
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (report(e, ErrorCode::timeout, took, limit) != 0) return 1;
    }
    // Aborted: later calls fail at once with the original reason.
    try {
        comm->barrier();
        std::printf("FAIL a barrier on the aborted communicator succeeded\n");
        return 1;
    } catch (const Error &e) {
        const bool ok = e.code() == ErrorCode::timeout && std::strstr(e.what(), "aborted");
        std::printf("%s later call: %s: %s\n", ok ? "OK" : "FAIL", error_code_name(e.code()), e.what());
        return ok ? 0 : 1;
    }
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s probe N | staged-kill VICTIM | nccl-skip VICTIM\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1];
    const int arg = std::atoi(argv[2]);
    if (mode == "probe") {
        const int n = devices();
        std::printf("%d CUDA device(s) visible, %d needed\n", n, arg);
        return n >= arg ? 0 : 77;
    }
    try {
        if (mode == "staged-kill") return staged_kill(arg);
        if (mode == "nccl-skip") return nccl_skip(arg);
    } catch (const std::exception &e) {
        std::printf("FAIL unexpected error: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
}
