// The C tests' one CUDA runtime call: a synchronous copy between host and device memory
// (cudaMemcpyDefault; on the legacy default stream, so it is ordered after what an optimizer with
// a NULL cuda_stream enqueued and before what it enqueues next). In test_capi it is the test's
// own static CUDA runtime (libshardopt.so hides its copy; both share the device's primary
// context); in test_capi_gpu_standin, the CUDA stand-in's. Without CUDA it reports unavailable.
#include <cstddef>

#ifdef SHARDOPT_TEST_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

// 0: copied; 1: no CUDA runtime in this program; 2: the copy failed.
extern "C" __attribute__((visibility("default"))) int test_cuda_copy(void *dst, const void *src, std::size_t bytes) {
#ifdef SHARDOPT_TEST_HAVE_CUDA
    return cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess ? 0 : 2;
#else
    (void)dst;
    (void)src;
    (void)bytes;
    return 1;
#endif
}

// 1: `ptr` is device memory (cudaPointerGetAttributes); 0: it is not, or there is no CUDA runtime.
extern "C" __attribute__((visibility("default"))) int test_cuda_is_device(const void *ptr) {
#ifdef SHARDOPT_TEST_HAVE_CUDA
    cudaPointerAttributes attributes{};
    return cudaPointerGetAttributes(&attributes, ptr) == cudaSuccess && attributes.type == cudaMemoryTypeDevice;
#else
    (void)ptr;
    return 0;
#endif
}

// For the Python gpu_emulated tests' stream-ordering case (a DLPack consumer's stream ordered after
// the optimizer's compute stream): streams, a gate that holds a stream until opened
// (tests/gpu/cuda_gate.hpp, 20 s at most), and asynchronous device copies. Each returns 0 on
// success, 2 when the CUDA call failed.
#ifdef SHARDOPT_TEST_HAVE_CUDA
#include "../../tests/gpu/cuda_gate.hpp"

#define TEST_EXPORT extern "C" __attribute__((visibility("default")))
TEST_EXPORT int test_cuda_stream_create(void **stream) {
    return cudaStreamCreateWithFlags(reinterpret_cast<cudaStream_t *>(stream), cudaStreamNonBlocking) == cudaSuccess ? 0 : 2;
}
TEST_EXPORT int test_cuda_stream_destroy(void *stream) {
    return cudaStreamDestroy(static_cast<cudaStream_t>(stream)) == cudaSuccess ? 0 : 2;
}
TEST_EXPORT int test_cuda_stream_synchronize(void *stream) {
    return cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) == cudaSuccess ? 0 : 2;
}
// 0: everything enqueued on `stream` has run; 3: work is still pending.
TEST_EXPORT int test_cuda_stream_query(void *stream) {
    const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? 0 : e == cudaErrorNotReady ? 3 : 2;
}
TEST_EXPORT int test_cuda_gate_enqueue(void *stream, void **gate) {
    auto *g = new gpu_test::Gate(std::chrono::seconds(20));
    *gate = g;
    return g->enqueue(static_cast<cudaStream_t>(stream)) == cudaSuccess ? 0 : 2;
}
// Opens the gate; with release, also frees it (the stream it held must have passed it).
TEST_EXPORT void test_cuda_gate_open(void *gate, int release) {
    static_cast<gpu_test::Gate *>(gate)->open();
    if (release) delete static_cast<gpu_test::Gate *>(gate);
}
TEST_EXPORT int test_cuda_copy_async(void *dst, const void *src, std::size_t bytes, void *stream) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)) == cudaSuccess ? 0 : 2;
}
TEST_EXPORT int test_cuda_malloc(void **ptr, std::size_t bytes) { return cudaMalloc(ptr, bytes) == cudaSuccess ? 0 : 2; }
TEST_EXPORT int test_cuda_free(void *ptr) { return cudaFree(ptr) == cudaSuccess ? 0 : 2; }
#endif
