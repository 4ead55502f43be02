// The stand-in's semantics, on which the gpu_emulated tests rely: work lands later than the call
// that enqueued it, streams and events order it as CUDA does, and the pageable-copy rules hold.
// Each check is one a wrong stand-in would fail (a copy done at the call, a wait that does not
// wait, an implicit ordering that does not exist on a GPU).
#define BOOST_TEST_MODULE cuda_standin
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

void ok(cudaError_t status) { BOOST_REQUIRE_EQUAL(cudaGetErrorName(status), cudaGetErrorName(cudaSuccess)); }

struct Device {
    float *ptr = nullptr;
    explicit Device(std::size_t n) { ok(cudaMalloc(reinterpret_cast<void **>(&ptr), n * sizeof(float))); }
    ~Device() { (void)cudaFree(ptr); }
};

} // namespace

BOOST_AUTO_TEST_CASE(async_copy_lands_after_the_call_and_before_the_event) {
    float *pinned = nullptr;
    ok(cudaHostAlloc(reinterpret_cast<void **>(&pinned), 4 * sizeof(float), 0));
    Device d(4);
    const float host[4] = {1, 2, 3, 4};
    cudaStream_t s;
    ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ok(cudaMemcpyAsync(d.ptr, host, sizeof(host), cudaMemcpyHostToDevice, s));
    std::memset(pinned, 0, 4 * sizeof(float));
    ok(cudaMemcpyAsync(pinned, d.ptr, sizeof(host), cudaMemcpyDeviceToHost, s));
    BOOST_TEST(pinned[3] == 0.0f); // not yet: the copy runs later than the call
    cudaEvent_t e;
    ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ok(cudaEventRecord(e, s));
    BOOST_TEST(cudaEventQuery(e) == cudaErrorNotReady);
    ok(cudaEventSynchronize(e));
    BOOST_TEST(pinned[3] == 4.0f);
    ok(cudaEventDestroy(e));
    ok(cudaStreamDestroy(s));
    ok(cudaFreeHost(pinned));
}

BOOST_AUTO_TEST_CASE(fresh_device_memory_is_not_zero) {
    Device d(2);
    float back[2] = {0, 0};
    ok(cudaMemcpy(back, d.ptr, sizeof(back), cudaMemcpyDeviceToHost));
    BOOST_TEST(std::isnan(back[0]));
}

// The trap behind the first GPU run's failures: cudaMemcpy from pageable memory returns before
// the bytes reach the device, and a non-blocking stream does not wait for the legacy stream.
BOOST_AUTO_TEST_CASE(pageable_cudaMemcpy_is_not_ordered_before_a_non_blocking_stream) {
    Device d(1);
    float *pinned = nullptr;
    ok(cudaHostAlloc(reinterpret_cast<void **>(&pinned), sizeof(float), 0));
    cudaStream_t nonblocking, blocking;
    ok(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    ok(cudaStreamCreate(&blocking));
    const float seven = 7;
    ok(cudaMemcpy(d.ptr, &seven, sizeof(float), cudaMemcpyHostToDevice));
    ok(cudaMemcpyAsync(pinned, d.ptr, sizeof(float), cudaMemcpyDeviceToHost, nonblocking));
    ok(cudaStreamSynchronize(nonblocking));
    BOOST_TEST(*pinned != 7.0f); // read before the staged bytes arrived

    const float eight = 8;
    ok(cudaMemcpy(d.ptr, &eight, sizeof(float), cudaMemcpyHostToDevice));
    ok(cudaMemcpyAsync(pinned, d.ptr, sizeof(float), cudaMemcpyDeviceToHost, blocking));
    ok(cudaStreamSynchronize(blocking));
    BOOST_TEST(*pinned == 8.0f); // a blocking stream follows the legacy stream

    // An event recorded on the legacy stream orders a non-blocking stream after it.
    const float nine = 9;
    ok(cudaMemcpy(d.ptr, &nine, sizeof(float), cudaMemcpyHostToDevice));
    cudaEvent_t e;
    ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ok(cudaEventRecord(e, cudaStreamLegacy));
    ok(cudaStreamWaitEvent(nonblocking, e, 0));
    ok(cudaMemcpyAsync(pinned, d.ptr, sizeof(float), cudaMemcpyDeviceToHost, nonblocking));
    ok(cudaStreamSynchronize(nonblocking));
    BOOST_TEST(*pinned == 9.0f);
    ok(cudaEventDestroy(e));
    ok(cudaStreamDestroy(nonblocking));
    ok(cudaStreamDestroy(blocking));
    ok(cudaFreeHost(pinned));
}

BOOST_AUTO_TEST_CASE(copy_to_pageable_memory_waits_for_itself) {
    Device d(3);
    const float in[3] = {1, 2, 3};
    ok(cudaMemcpy(d.ptr, in, sizeof(in), cudaMemcpyHostToDevice));
    float out[3] = {0, 0, 0};
    cudaStream_t s;
    ok(cudaStreamCreate(&s)); // blocking: after the legacy stream's staged copy
    ok(cudaMemcpyAsync(out, d.ptr, sizeof(out), cudaMemcpyDeviceToHost, s));
    BOOST_TEST(out[2] == 3.0f);
    ok(cudaStreamDestroy(s));
}

BOOST_AUTO_TEST_CASE(wrong_directions_and_handles_are_refused) {
    Device d(2);
    float host[2] = {0, 0};
    BOOST_TEST(cudaMemcpy(host, d.ptr, sizeof(host), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    BOOST_TEST(cudaGetLastError() == cudaErrorInvalidValue);
    BOOST_TEST(cudaGetLastError() == cudaSuccess);
    BOOST_TEST(cudaMemcpy(d.ptr, host, 3 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    cudaStream_t s;
    ok(cudaStreamCreate(&s));
    ok(cudaStreamDestroy(s));
    BOOST_TEST(cudaStreamSynchronize(s) == cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
}

BOOST_AUTO_TEST_CASE(stream_waits_for_an_event_of_another_stream) {
    Device d(1);
    cudaStream_t a, b;
    ok(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    ok(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    static volatile bool gate_open = false;
    gate_open = false;
    // a: hold until opened, then write 5; b waits for a's event and reads.
    ok(cudaLaunchHostFunc(a, [](void *) { while (!gate_open) {} }, nullptr));
    ok(cudaMemsetAsync(d.ptr, 0, sizeof(float), a));
    cudaEvent_t e;
    ok(cudaEventCreate(&e));
    ok(cudaEventRecord(e, a));
    ok(cudaStreamWaitEvent(b, e, 0));
    float back = -1;
    float *pinned = nullptr;
    ok(cudaHostAlloc(reinterpret_cast<void **>(&pinned), sizeof(float), 0));
    *pinned = -1;
    ok(cudaMemcpyAsync(pinned, d.ptr, sizeof(float), cudaMemcpyDeviceToHost, b));
    BOOST_TEST(cudaStreamQuery(b) == cudaErrorNotReady);
    gate_open = true;
    ok(cudaStreamSynchronize(b));
    back = *pinned;
    BOOST_TEST(back == 0.0f);
    ok(cudaEventDestroy(e));
    ok(cudaStreamDestroy(a));
    ok(cudaStreamDestroy(b));
    ok(cudaFreeHost(pinned));
}
