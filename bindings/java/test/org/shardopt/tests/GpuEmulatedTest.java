package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.shardopt.*;
import org.shardopt.ParameterLayout.Precision;

/** Issue 34, label gpu_emulated (ctest bindings.java_gpu_emulated): the caller's own CUDA memory as the parameter buffer
 *  (initialize(layout, initial, DeviceMemory)) and orderStream, on the C ABI built against the CUDA stand-in (capi/tests:
 *  shardopt_standin, preloaded in place of libshardopt.so.2), so without a GPU. The test's device memory, streams and
 *  copies are the stand-in's CUDA calls as a CUDA library would make them (StandinCuda, a test-only JNI library).
 *  Skipped without them (bindings.java runs this package without the stand-in). */
@SuppressWarnings({"unchecked", "rawtypes"})
class GpuEmulatedTest {
    @BeforeAll
    static void standin() {
        Assumptions.assumeTrue(System.getenv("SHARDOPT_STANDIN_JNI") != null && System.getenv("SHARDOPT_STANDIN_LIBRARY") != null,
                               "needs the CUDA stand-in preloaded (ctest bindings.java_gpu_emulated)");
    }

    // A linear least-squares model over 32 samples of 8 features (5 + 3 parameters), exact data.
    private static final float[][] X = new float[32][8];
    private static final float[] Y = new float[32], INITIAL = new float[8];
    static {
        for (int s = 0; s < 32; ++s)
            for (int j = 0; j < 8; ++j) { X[s][j] = ((s * 7 + j * 3) % 11 - 5) / 4f; Y[s] += X[s][j] * (j - 3.5f) / 4f; }
        for (int j = 0; j < 8; ++j) INITIAL[j] = 0.5f - j / 7f;
    }
    private static final GradientModel MODEL = (p, g, samples, d) -> {
        double loss = 0;
        for (long s : samples) {
            double r = -Y[(int) s];
            for (int j = 0; j < 8; ++j) r += X[(int) s][j] * p.get(j);
            loss += r * r / 2;
            if (g != null) for (int j = 0; j < 8; ++j) g.add(j, X[(int) s][j] * r / samples.length);
        }
        return loss / samples.length;
    };
    private static ParameterLayout layout() { return new ParameterLayout(Precision.FLOAT32).add("w", 5).add("v", 3); }
    private static ShardingConfiguration config(CommunicationBackend b, MemorySpace memory) {
        ShardingConfiguration c = new ShardingConfiguration(b);
        c.setMemory(memory);
        return c;
    }
    private static DDPOptimizer adam(ShardingConfiguration c) {
        AdamOptimizerOptions o = new AdamOptimizerOptions();
        o.setLearningRate(0.05);
        o.setBatchSize(8);
        o.setMaxIterations(3);
        o.setShuffleData(false);
        o.setUseEarlyStopping(false);
        return new DDPOptimizer(new AdamOptimizer(o), c);
    }
    /** 3 epochs of 4 steps: {the packed parameters, the optimizer's whole device buffer read back}. */
    private static float[][] train(ShardedOptimizer opt) {
        OptimizationResult r = opt.optimize(MODEL, new OptimizationInputData(32));
        assertEquals(12, r.getSteps());
        NativeView view = opt.getParameters();
        return new float[][] {opt.getParametersFloat(), StandinCuda.read(view.getDeviceAddress(), view.size())};
    }

    @Test
    void deviceParametersAreTheCallersMemory() {
        try (StagedCommunicationBackend<Float> b = new StagedCommunicationBackend<>(0, 1)) {
            float[][] want;
            try (DDPOptimizer reference = adam(config(b, MemorySpace.CUDA))) { // the library's own device memory
                reference.initialize(layout(), INITIAL);
                want = train(reference);
            }
            long stream = StandinCuda.streamCreate(), mine = 0;
            try {
                try (DDPOptimizer opt = adam(config(b, MemorySpace.CUDA))) {
                    long n = opt.paddedCountFor(layout());
                    mine = StandinCuda.malloc(n * 4);
                    float[] junk = new float[(int) n];
                    Arrays.fill(junk, 99f);
                    StandinCuda.toDevice(mine, junk);
                    opt.initialize(layout(), INITIAL, new DeviceMemory(mine, n, Precision.FLOAT32, stream)); // orders `stream` after it
                    assertEquals(mine, opt.getParameters().getDeviceAddress(), "the optimizer's parameters are the caller's memory");
                    assertArrayEquals(INITIAL, opt.getParametersFloat(), "initial written into the caller's memory");
                    float[][] got = train(opt);
                    assertArrayEquals(want[0], got[0], "equal to the run in the library's memory, bit for bit");
                    assertArrayEquals(want[1], got[1]);
                    assertArrayEquals(want[1], StandinCuda.read(mine, n), "the updates are in the caller's buffer");
                    assertFalse(Arrays.equals(INITIAL, got[0]), "training changed the parameters");
                    opt.reset(); // re-created over the same memory
                    assertEquals(mine, opt.getParameters().getDeviceAddress());
                    assertArrayEquals(Arrays.copyOf(INITIAL, 5), StandinCuda.read(mine, 5), "reset: the initial parameters, in the caller's memory");
                    opt.orderStream(stream);
                    opt.orderStream(0); // the legacy default stream
                }
                // without initial, the memory holds the initial parameters; ZeRO-2 takes it too
                StandinCuda.toDevice(mine, want[1]);
                try (ShardedOptimizer opt = new ZeRO2Optimizer(new AdamOptimizer(), config(b, MemorySpace.CUDA))) {
                    opt.initialize(layout(), null, new DeviceMemory(mine, want[1].length, Precision.FLOAT32));
                    assertArrayEquals(want[0], opt.getParametersFloat(), "the caller's memory as the initial parameters");
                }
            } finally {
                if (mine != 0) StandinCuda.free(mine);
                StandinCuda.streamDestroy(stream);
            }
        }
    }

    @Test
    void deviceParameterMistakesRaise() {
        // the type's own checks
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new DeviceMemory(0, 4, Precision.FLOAT32));
        assertTrue(e.getMessage().contains("address is 0"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new DeviceMemory(0x1004, 4, Precision.FLOAT64));
        assertTrue(e.getMessage().contains("not aligned to FLOAT64 (8 bytes)"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new DeviceMemory(0x1000, 0, Precision.FLOAT32));
        assertTrue(e.getMessage().contains("at least 1 element"), e.getMessage());
        assertThrows(NullPointerException.class, () -> new DeviceMemory(0x1000, 4, null));
        try (StagedCommunicationBackend<Float> b = new StagedCommunicationBackend<>(0, 1);
             DDPOptimizer opt = adam(config(b, MemorySpace.CUDA))) {
            long n = opt.paddedCountFor(layout()), mine = StandinCuda.malloc((n + 1) * 8);
            try {
                e = assertThrows(IllegalArgumentException.class, () -> opt.initialize(layout(), INITIAL, new DeviceMemory(mine, n + 1, Precision.FLOAT32)));
                assertTrue(e.getMessage().startsWith("SHARDOPT_ERR_INVALID_ARGUMENT") && e.getMessage().contains("param_count is " + (n + 1) + " but the layout needs " + n), e.getMessage());
                e = assertThrows(IllegalArgumentException.class, () -> opt.initialize(layout(), INITIAL, new DeviceMemory(mine, n, Precision.FLOAT64)));
                assertTrue(e.getMessage().contains("parameters holds float64 elements") && e.getMessage().contains("float32"), e.getMessage());
                ByteBuffer host = ByteBuffer.allocateDirect((int) n * 4).order(ByteOrder.nativeOrder());
                e = assertThrows(IllegalArgumentException.class, // host memory said to be device memory: the library's check
                                 () -> opt.initialize(layout(), INITIAL, new DeviceMemory(StandinCuda.address(host), n, Precision.FLOAT32)));
                assertTrue(e.getMessage().contains("is host memory; the CUDA optimizer needs device"), e.getMessage());
                e = assertThrows(IllegalArgumentException.class, () -> opt.initialize(layout(), INITIAL, host.asFloatBuffer()));
                assertTrue(e.getMessage().contains("parameters is host memory (a direct buffer), the optimizer's memory is CUDA device memory"), e.getMessage());
                assertFalse(opt.isInitialized());
                try (DDPOptimizer hostOpt = adam(config(b, MemorySpace.HOST))) { // device memory where host memory is: never read
                    e = assertThrows(IllegalArgumentException.class, () -> hostOpt.initialize(layout(), INITIAL, new DeviceMemory(mine, n, Precision.FLOAT32)));
                    assertTrue(e.getMessage().contains("parameters is CUDA device memory (a DeviceMemory), the optimizer's memory is host memory"), e.getMessage());
                }
                try (FSDPOptimizer fsdp = new FSDPOptimizer(new AdamOptimizer(), config(b, MemorySpace.CUDA))) {
                    UnsupportedOperationException u = assertThrows(UnsupportedOperationException.class,
                        () -> fsdp.initialize(layout(), INITIAL, new DeviceMemory(mine, n, Precision.FLOAT32)));
                    assertTrue(u.getMessage().contains("caller-owned parameters"), u.getMessage());
                }
                // orderStream's arguments: an initialized optimizer, a stream the runtime knows
                IllegalStateException s = assertThrows(IllegalStateException.class, () -> opt.orderStream(0));
                assertTrue(s.getMessage().contains("not initialized"), s.getMessage());
                opt.initialize(layout(), INITIAL, new DeviceMemory(mine, n, Precision.FLOAT32));
                e = assertThrows(IllegalArgumentException.class, () -> opt.orderStream(0x5eed));
                assertTrue(e.getMessage().contains("cudaStreamWaitEvent on the consumer's stream failed"), e.getMessage());
                opt.close();
                assertThrows(IllegalStateException.class, () -> opt.orderStream(0));
            } finally {
                StandinCuda.free(mine);
            }
        }
    }

    /** orderStream makes the consumer's stream wait for the optimizer's work: its compute stream held at a gate, with a write
     *  of the parameters behind it, a consumer's read on its own stream cannot run until the gate opens. */
    @Test
    void orderStreamOrdersTheConsumer() throws InterruptedException {
        long compute = StandinCuda.streamCreate(), consumer = StandinCuda.streamCreate(), scratch = StandinCuda.malloc(32);
        float[] fresh = {7, 8, 9, 10};
        try (StagedCommunicationBackend<Float> b = new StagedCommunicationBackend<>(0, 1)) {
            ShardingConfiguration c = config(b, MemorySpace.CUDA);
            c.setCudaStream(compute);
            try (DDPOptimizer opt = adam(c)) {
                opt.initialize(layout(), INITIAL);
                long parameters = opt.getParameters().getDeviceAddress();
                StandinCuda.toDevice(scratch + 16, fresh); // the new values, on the device already
                long gate = StandinCuda.gateEnqueue(compute);
                try {
                    StandinCuda.copyAsync(parameters, scratch + 16, 16, compute); // the optimizer's "work", behind the gate
                    opt.orderStream(consumer);
                    StandinCuda.copyAsync(scratch, parameters, 16, consumer); // the consumer's read
                    for (long end = System.nanoTime() + 400_000_000L; System.nanoTime() < end; Thread.sleep(20))
                        assertFalse(StandinCuda.streamDone(consumer), "the consumer's stream ran before the optimizer's work it was ordered after");
                    StandinCuda.gateOpen(gate, false);
                    StandinCuda.streamSynchronize(consumer);
                    assertArrayEquals(fresh, StandinCuda.read(scratch, 4), "the consumer saw the finished work");
                } finally { // open before the optimizer is closed (its close waits for the compute stream)
                    StandinCuda.gateOpen(gate, false);
                    StandinCuda.streamSynchronize(compute);
                    StandinCuda.gateOpen(gate, true);
                }
            }
        } finally {
            StandinCuda.free(scratch);
            StandinCuda.streamDestroy(consumer);
            StandinCuda.streamDestroy(compute);
        }
    }
}
