/* Test-only JNI for org.shardopt.tests.StandinCuda (the Java gpu_emulated test): the CUDA stand-in's test helpers
 * (capi/tests/cuda_copy.cpp: device memory, streams, a gate, copies), looked up in the process, where the stand-in is
 * preloaded in place of libshardopt.so.2. A failed call throws IllegalStateException naming it. Nothing here ships. */
#include <dlfcn.h>
#include <jni.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define P(x) ((void *)(uintptr_t)(x))
#define J(x) ((jlong)(uintptr_t)(x))

static void *lookup(JNIEnv *env, const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) (*env)->ThrowNew(env, (*env)->FindClass(env, "java/lang/UnsatisfiedLinkError"), name);
    return f;
}
static int fails(JNIEnv *env, int status, const char *what) {
    char m[128];
    if (status == 0) return 0;
    snprintf(m, sizeof m, "stand-in %s failed (%d)", what, status);
    (*env)->ThrowNew(env, (*env)->FindClass(env, "java/lang/IllegalStateException"), m);
    return 1;
}
/* f, the helper `name` (RESULT (*)ARGS), or return R with UnsatisfiedLinkError thrown */
#define HELPER(RESULT, ARGS, name, R) RESULT(*f) ARGS = (RESULT(*) ARGS)lookup(env, name); if (!f) return R

JNIEXPORT jlong JNICALL Java_org_shardopt_tests_StandinCuda_malloc(JNIEnv *env, jclass c, jlong bytes) {
    void *p = NULL;
    HELPER(int, (void **, size_t), "test_cuda_malloc", 0);
    return fails(env, f(&p, (size_t)bytes), "cudaMalloc") ? 0 : J(p);
}
JNIEXPORT void JNICALL Java_org_shardopt_tests_StandinCuda_free(JNIEnv *env, jclass c, jlong p) {
    HELPER(int, (void *), "test_cuda_free", );
    fails(env, f(P(p)), "cudaFree");
}
/* A synchronous copy of a float[] to device memory (toDevice) or back. */
static void copy_floats(JNIEnv *env, jlong device, jfloatArray host, int to_device) {
    jsize n = (*env)->GetArrayLength(env, host);
    jfloat *h;
    int status;
    HELPER(int, (void *, const void *, size_t), "test_cuda_copy", );
    if (!(h = (*env)->GetFloatArrayElements(env, host, NULL))) return;
    status = to_device ? f(P(device), h, (size_t)n * sizeof *h) : f(h, P(device), (size_t)n * sizeof *h);
    (*env)->ReleaseFloatArrayElements(env, host, h, to_device ? JNI_ABORT : 0);
    fails(env, status, "cudaMemcpy");
}
JNIEXPORT void JNICALL Java_org_shardopt_tests_StandinCuda_toDevice(JNIEnv *env, jclass c, jlong device, jfloatArray host) {
    copy_floats(env, device, host, 1);
}
JNIEXPORT void JNICALL Java_org_shardopt_tests_StandinCuda_fromDevice(JNIEnv *env, jclass c, jfloatArray host, jlong device) {
    copy_floats(env, device, host, 0);
}
JNIEXPORT void JNICALL Java_org_shardopt_tests_StandinCuda_copyAsync(JNIEnv *env, jclass c, jlong dst, jlong src, jlong bytes,
                                                                     jlong stream) {
    HELPER(int, (void *, const void *, size_t, void *), "test_cuda_copy_async", );
    fails(env, f(P(dst), P(src), (size_t)bytes, P(stream)), "cudaMemcpyAsync");
}
JNIEXPORT jlong JNICALL Java_org_shardopt_tests_StandinCuda_streamCreate(JNIEnv *env, jclass c) {
    void *s = NULL;
    HELPER(int, (void **), "test_cuda_stream_create", 0);
    return fails(env, f(&s), "cudaStreamCreate") ? 0 : J(s);
}
JNIEXPORT void JNICALL Java_org_shardopt_tests_StandinCuda_streamDestroy(JNIEnv *env, jclass c, jlong s) {
    HELPER(int, (void *), "test_cuda_stream_destroy", );
    fails(env, f(P(s)), "cudaStreamDestroy");
}
JNIEXPORT void JNICALL Java_org_shardopt_tests_StandinCuda_streamSynchronize(JNIEnv *env, jclass c, jlong s) {
    HELPER(int, (void *), "test_cuda_stream_synchronize", );
    fails(env, f(P(s)), "cudaStreamSynchronize");
}
/* true: everything enqueued on the stream has run */
JNIEXPORT jboolean JNICALL Java_org_shardopt_tests_StandinCuda_streamDone(JNIEnv *env, jclass c, jlong s) {
    int status;
    HELPER(int, (void *), "test_cuda_stream_query", JNI_FALSE);
    if ((status = f(P(s))) == 0) return JNI_TRUE;
    if (status != 3) fails(env, status, "cudaStreamQuery"); /* 3: work still pending */
    return JNI_FALSE;
}
JNIEXPORT jlong JNICALL Java_org_shardopt_tests_StandinCuda_gateEnqueue(JNIEnv *env, jclass c, jlong s) {
    void *gate = NULL;
    HELPER(int, (void *, void **), "test_cuda_gate_enqueue", 0);
    return fails(env, f(P(s), &gate), "gate") ? 0 : J(gate);
}
JNIEXPORT void JNICALL Java_org_shardopt_tests_StandinCuda_gateOpen(JNIEnv *env, jclass c, jlong gate, jboolean release) {
    HELPER(void, (void *, int), "test_cuda_gate_open", );
    f(P(gate), release ? 1 : 0);
}
/* The address of a direct buffer (host memory), for the test's host-memory-as-device case. */
JNIEXPORT jlong JNICALL Java_org_shardopt_tests_StandinCuda_address(JNIEnv *env, jclass c, jobject direct) {
    return J((*env)->GetDirectBufferAddress(env, direct));
}
