package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.shardopt.*;
import org.shardopt.ParameterLayout.Precision;

/** Issue 34, label gpu_emulated (ctest bindings.java_gpu_emulated): optimize with the model on the device
 *  (setDeviceBatches) on the CUDA stand-in. The model gets device views of the optimizer's memory and moves them as a CUDA
 *  library would (StandinCuda's cudaMemcpy); its training equals the same training with host copies, bit for bit, its
 *  views expire with the call, and what cannot work is refused. Skipped without the stand-in. */
@SuppressWarnings({"unchecked", "rawtypes"})
class DeviceBatchTest {
    @BeforeAll
    static void standin() {
        Assumptions.assumeTrue(System.getenv("SHARDOPT_STANDIN_JNI") != null && System.getenv("SHARDOPT_STANDIN_LIBRARY") != null,
                               "needs the CUDA stand-in preloaded (ctest bindings.java_gpu_emulated)");
    }

    /** Sample s pulls parameter j towards (s % 5 - 2) / 4 + j / 8: the mean loss, and the mean gradient into grad. */
    private static double bowl(float[] p, float[] grad, long[] samples) {
        double loss = 0;
        for (long s : samples)
            for (int j = 0; j < p.length; ++j) {
                double d = p[j] - ((s % 5 - 2) / 4.0 + j / 8.0);
                loss += 0.5 * d * d / samples.length;
                grad[j] += (float) (d / samples.length);
            }
        return loss;
    }
    private static DDPOptimizer adam(CommunicationBackend b, MemorySpace memory, boolean deviceBatches) {
        ShardingConfiguration c = new ShardingConfiguration(b);
        c.setMemory(memory);
        AdamOptimizerOptions o = new AdamOptimizerOptions();
        o.setLearningRate(0.05);
        o.setBatchSize(6);
        o.setMaxIterations(5);
        o.setRandomSeed(5);
        o.setDeviceBatches(deviceBatches);
        DDPOptimizer opt = new DDPOptimizer(new AdamOptimizer(o), c);
        opt.initialize(new ParameterLayout(Precision.FLOAT32).add("w", 6), new float[] {0.5f, -1f, 2f, 0.25f, 1f, -0.5f});
        return opt;
    }
    private static OptimizationInputData data() {
        OptimizationInputData d = new OptimizationInputData(20);
        d.numValidationSamples = 7;
        return d;
    }

    @Test
    void theModelOnTheDeviceTrainsAsWithHostCopies() {
        try (StagedCommunicationBackend<Float> b = new StagedCommunicationBackend<>(0, 1)) {
            OptimizationResult want, got;
            try (DDPOptimizer hostCopies = adam(b, MemorySpace.CUDA, false)) {
                want = hostCopies.optimize((p, g, samples, d) -> {
                    assertFalse(p.isDevice());
                    float[] host = new float[6], grad = new float[6];
                    for (int j = 0; j < 6; ++j) host[j] = (float) p.get(j);
                    double loss = bowl(host, grad, samples);
                    if (g != null) for (int j = 0; j < 6; ++j) g.set(j, grad[j]);
                    return loss;
                }, data());
            }
            List<NativeView> kept = new ArrayList<>();
            int[] calls = {0, 0}; // all, loss only
            try (DDPOptimizer onDevice = adam(b, MemorySpace.CUDA, true)) {
                got = onDevice.optimize((p, g, samples, d) -> {
                    ++calls[0];
                    assertTrue(p.isDevice() && p.size() == 6 && (g == null || g.isDevice()), "device views of the optimizer's memory");
                    float[] grad = new float[6];
                    double loss = bowl(StandinCuda.read(p.getDeviceAddress(), 6), grad, samples);
                    if (g != null) StandinCuda.toDevice(g.getDeviceAddress(), grad); else ++calls[1];
                    kept.add(p);
                    return loss;
                }, data());
            }
            assertTrue(calls[0] > 0 && calls[1] > 0, "training and loss-only calls");
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> kept.get(0).getDeviceAddress());
            assertTrue(e.getMessage().contains("no longer valid"), e.getMessage());
            assertArrayEquals((float[]) want.getBestSolution(), (float[]) got.getBestSolution(), "the host-copy run's best solution, bit for bit");
            assertArrayEquals(want.getValidationLossHistory(), got.getValidationLossHistory());
            double[] h = got.getValidationLossHistory();
            assertTrue(h[h.length - 1] < h[0], "it trained");
        }
    }

    @Test
    void deviceBatchesOnHostMemoryIsRefused() {
        try (StagedCommunicationBackend<Float> b = new StagedCommunicationBackend<>(0, 1);
             DDPOptimizer onHost = adam(b, MemorySpace.HOST, true)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                                                      () -> onHost.optimize((p, g, s, d) -> 0.0, new OptimizationInputData(4)));
            assertTrue(e instanceof ShardoptException && e.getMessage().contains("device_batches needs an optimizer in cuda memory"), e.getMessage());
        }
    }
}
