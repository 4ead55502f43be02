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
