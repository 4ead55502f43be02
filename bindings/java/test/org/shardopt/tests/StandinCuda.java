package org.shardopt.tests;

/** The CUDA stand-in's test helpers (capi/tests/cuda_copy.cpp) for GpuEmulatedTest, through a test-only JNI library
 *  (bindings/java/test/native/standin_cuda_jni.c, its path in SHARDOPT_STANDIN_JNI), as a CUDA library would call them. */
final class StandinCuda {
    static { System.load(System.getenv("SHARDOPT_STANDIN_JNI")); }
    private StandinCuda() {}
    static native long malloc(long bytes);
    static native void free(long address);
    static native void toDevice(long device, float[] host);
    static native void fromDevice(float[] host, long device);
    static native void copyAsync(long dst, long src, long bytes, long stream);
    static native long streamCreate();
    static native void streamDestroy(long stream);
    static native void streamSynchronize(long stream);
    static native boolean streamDone(long stream);
    static native long gateEnqueue(long stream);
    static native void gateOpen(long gate, boolean release);
    static native long address(java.nio.Buffer direct); // a direct buffer's (host memory)

    static float[] read(long device, long count) {
        float[] host = new float[(int) count];
        fromDevice(host, device);
        return host;
    }
}
