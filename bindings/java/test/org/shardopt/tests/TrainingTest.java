package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.shardopt.*;
import org.junit.jupiter.api.Test;

class TrainingTest {
    static final MlpDemo MODEL = new MlpDemo();

    static Object[] train(String strategy, int worldSize) {
        return Ranks.run(worldSize, b -> {
            ShardingConfiguration cfg = new ShardingConfiguration(b);
            AdamOptimizerOptions o = new AdamOptimizerOptions();
            o.setLearningRate(3e-3);
            AdamOptimizer adam = new AdamOptimizer(o);
            ShardedOptimizer opt = strategy.equals("ddp") ? new DDPOptimizer(adam, cfg)
                : strategy.equals("zero2") ? new ZeRO2Optimizer(adam, cfg) : new FSDPOptimizer(adam, cfg);
            try (ShardedOptimizer s = opt) {
                s.initialize(MODEL.layout(), MODEL.initialParameters());
                OptimizationResult r = s.optimize(MODEL, new OptimizationInputData(MODEL.samples, 128, 3));
                return new Object[] {r, s.getParametersFloat()};
            }
        }).get(0);
    }

    @Test
    void fourRanksMatchSingleProcess() {
        Object[] one = train("ddp", 1);
        OptimizationResult ref = (OptimizationResult) one[0];
        assertTrue(ref.getFitnessHistory()[2] < 0.8 * ref.getFitnessHistory()[0]);
        for (String s : new String[] {"ddp", "zero2", "fsdp"}) {
            Object[] four = train(s, 4);
            OptimizationResult r = (OptimizationResult) four[0];
            assertEquals(ref.getIterations(), r.getIterations());
            assertArrayEquals(ref.getFitnessHistory(), r.getFitnessHistory(), 1e-5, s);
            float[] a = (float[]) one[1], p = (float[]) four[1];
            for (int i = 0; i < a.length; ++i) assertEquals(a[i], p[i], 1e-5, s + " parameter " + i);
        }
    }

    @Test
    void stepApiWithZeroCopyBuffers() {
        List<float[]> res = Ranks.run(4, b -> {
            try (DDPOptimizer opt = new DDPOptimizer(new StochasticGradientDescentOptimizer(), new ShardingConfiguration(b, 0.5))) {
                ParameterLayout lay = new ParameterLayout().add("w", 10);
                FloatBuffer mine = ByteBuffer.allocateDirect((int) opt.paddedCountFor(lay) * 4)
                    .order(ByteOrder.nativeOrder()).asFloatBuffer();
                float[] ones = new float[10];
                java.util.Arrays.fill(ones, 1f);
                opt.initialize(lay, ones, mine);
                opt.zeroGrad();
                NativeView g = opt.getBucketGradient(0);
                for (int i = 0; i < 10; ++i) g.set(i, b.getRank() + 1f);
                StepResult r = opt.step();
                assertTrue(r.applied);
                assertTrue(r.reduceWaitSeconds >= 0 && r.updateSeconds >= 0 && r.postUpdateSeconds >= 0);
                assertEquals(1 - 0.5f * 2.5f, mine.get(3), 1e-6); // updated in the caller's buffer
                assertEquals(mine.get(3), (float) opt.getParameters().get(3));
                return opt.getParametersFloat();
            }
        });
        for (float[] p : res) assertEquals(-0.25f, p[0], 1e-6);
    }

    @Test
    void configurationChangesBehaviour() {
        List<int[]> res = Ranks.run(2, b -> {
            ShardingConfiguration[] cfgs = {ShardingConfiguration.createDefault(b),
                ShardingConfiguration.createForHighBandwidth(b), ShardingConfiguration.createForLowBandwidth(b)};
            int[] buckets = new int[3];
            for (int i = 0; i < 3; ++i) {
                ParameterLayout lay = new ParameterLayout();
                for (int t = 0; t < 8; ++t) lay.add("t" + t, 300);
                try (DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), cfgs[i], lay, null)) { buckets[i] = o.getBucketCount(); }
            }
            return buckets;
        });
        assertTrue(res.get(0)[1] > res.get(0)[0] && res.get(0)[0] > res.get(0)[2]);
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-cfg")) {
            ShardingConfiguration c = new ShardingConfiguration(b);
            assertThrows(UnsupportedOperationException.class, () -> c.setEnableGradientCompression(true));
            c.setAutoSyncGradients(false);
            assertThrows(IllegalArgumentException.class, () -> new FSDPOptimizer(new AdamOptimizer(), c));
            try (DDPOptimizer local = new DDPOptimizer(new AdamOptimizer(), c)) { assertFalse(local.isInitialized()); }
        }
    }

    @Test
    void defaultsMatchLibrary() {
        assertEquals(1e-3, new AdamOptimizerOptions().getLearningRate(), 1e-12);
        assertEquals(0.01, new AdamWOptimizerOptions().getWeightDecay(), 1e-12);
        assertEquals(0.9, new MomentumOptimizerOptions().getMomentum(), 1e-12);
        assertEquals(0.99, new RootMeanSquarePropagationOptimizerOptions().getDecay(), 1e-12);
        assertEquals(1e-6, new LambOptimizerOptions().getEpsilon(), 1e-12);
    }

    @Test
    void twoUcxProcesses() throws Exception {
        String run = System.getenv("SHARDOPT_RUN"), cp = System.getenv("SHARDOPT_JAVA_CP"), java = System.getenv("JAVA");
        org.junit.jupiter.api.Assumptions.assumeTrue(run != null && cp != null && java != null);
        Process p = new ProcessBuilder("python3", run, "-n", "2", "--timeout", "120", "--", java, "-cp", cp,
            "org.shardopt.tests.UcxWorker").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(150, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertEquals(2, out.split("ucx ok", -1).length - 1, out);
    }
}
