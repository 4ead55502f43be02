// How a GPU communicator orders its work against the caller's streams (gpu_comm.hpp, "Streams"),
// on the staged backend at world size 1 over the CUDA stand-in:
// - with no stream set, a call follows what the caller enqueued on the legacy default stream
//   before it, also a cudaMemcpy from pageable memory that returned before its bytes arrived;
// - a call follows the caller's work up to the moment it was issued and no further: an async
//   call does not wait for work the caller enqueued after it (the overlap DDP relies on).
#define BOOST_TEST_MODULE stream_order
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>
#include <vector>

#include "../gpu/cuda_gate.hpp"
#include "shardopt/error.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;

namespace {

void ok(cudaError_t status) { BOOST_REQUIRE_EQUAL(cudaGetErrorName(status), cudaGetErrorName(cudaSuccess)); }

// A point of the legacy stream that holds everything after it until opened (bounded at 20 s).
struct Gate : gpu_test::Gate {
    Gate() : gpu_test::Gate(std::chrono::seconds(20)) {}
    void enqueue() { ok(gpu_test::Gate::enqueue(cudaStreamLegacy)); }
};

struct DeviceFloats {
    float *ptr = nullptr;
    std::size_t count;
    explicit DeviceFloats(std::size_t n) : count(n) { ok(cudaMalloc(reinterpret_cast<void **>(&ptr), n * 4)); }
    ~DeviceFloats() { (void)cudaFree(ptr); }
    std::vector<float> read() const {
        std::vector<float> host(count);
        ok(cudaMemcpy(host.data(), ptr, count * 4, cudaMemcpyDeviceToHost));
        return host;
    }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_call_follows_a_pageable_cudaMemcpy_on_the_legacy_stream) {
    auto comm = create_communicator_from_env("staged");
    DeviceFloats in(4096), out(4096);
    std::vector<float> host(in.count);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i) - 7.0f;
    // Returns before the last bytes reach the device; the allreduce must read them all the same.
    // Out of place: at one rank the sum is the input, so only a separate output shows whether
    // the collective read the bytes (the late copy would repair an in-place buffer afterwards).
    ok(cudaMemcpy(in.ptr, host.data(), in.count * 4, cudaMemcpyHostToDevice));
    comm->allreduce(in.ptr, out.ptr, in.count, DType::f32, ReduceOp::sum);
    BOOST_TEST(out.read() == host, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_async_call_does_not_wait_for_work_enqueued_after_it) {
    auto comm = create_communicator_from_env("staged");
    comm->set_timeout(std::chrono::milliseconds(5000));
    DeviceFloats a(256), b(256);
    ok(cudaMemset(a.ptr, 0, a.count * 4));
    ok(cudaMemset(b.ptr, 0, b.count * 4));
    Gate before, after;
    before.enqueue();                 // the caller's earlier work, still running
    auto first = comm->allreduce_async(a.ptr, a.ptr, a.count, DType::f32, ReduceOp::sum);
    auto second = comm->allreduce_async(b.ptr, b.ptr, b.count, DType::f32, ReduceOp::sum);
    after.enqueue();                  // work the caller enqueued after issuing both
    // It follows the earlier work: still pending well after the stand-in's copies would be done.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_TEST(!first->test());
    before.open();
    // Both complete while `after` still holds the legacy stream: they follow the caller's
    // stream as it was when they were issued, not when the queue got to them.
    try {
        first->wait();
        second->wait();
    } catch (const Error &e) {
        after.open();
        BOOST_FAIL(std::string("a call waited for work enqueued after it: ") + e.what());
    }
    after.open();
    ok(cudaDeviceSynchronize());
}
