package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.shardopt.*;
import org.shardopt.samples.MlpDemo;
import org.junit.jupiter.api.Test;

class TrainingTest {
    static final MlpDemo MODEL = new MlpDemo();

    static Object[] train(String strategy, int worldSize) {
        return Ranks.run(worldSize, b -> {
            ShardingConfiguration cfg = new ShardingConfiguration(b);
            AdamOptimizerOptions o = new AdamOptimizerOptions();
            o.setLearningRate(3e-3);
            o.setBatchSize(128);
            o.setMaxIterations(3);
            AdamOptimizer adam = new AdamOptimizer(o);
            ShardedOptimizer opt = strategy.equals("ddp") ? new DDPOptimizer(adam, cfg)
                : strategy.equals("zero2") ? new ZeRO2Optimizer(adam, cfg) : new FSDPOptimizer(adam, cfg);
            try (ShardedOptimizer s = opt) {
                s.initialize(MODEL.layout(), MODEL.initialParameters());
                OptimizationResult r = s.optimize(MODEL, new OptimizationInputData(MODEL.samples));
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
            assertEquals(ref.getSteps(), r.getSteps());
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
            assertFalse(c.getEnableGradientCompression());                 // AiDotNet's default
            c.setEnableGradientCompression(true);                          // compression is real now: no refusal
            assertEquals(GradientCompression.INT8, c.getGradientCompression());
            c.setEnableGradientCompression(false);
            c.setAutoSyncGradients(false);
            assertThrows(IllegalArgumentException.class, () -> new FSDPOptimizer(new AdamOptimizer(), c));
            try (DDPOptimizer local = new DDPOptimizer(new AdamOptimizer(), c)) { assertFalse(local.isInitialized()); }
        }
    }

    // ---- gradient compression ----

    interface Make { ShardedOptimizer make(Optimizer w, ShardingConfiguration c); }

    /** The demo MLP with SGD momentum 0.9, lr 0.05 (as the C++ accuracy test), 80 steps on 4 in-memory ranks:
     *  {full-data loss, rank 0's bytes moved by optimize, rank 0's compression bytes}. */
    static double[] trainCompressed(Make make) {
        List<double[]> res = Ranks.run(4, b -> {
            MomentumOptimizerOptions o = new MomentumOptimizerOptions();
            o.setLearningRate(0.05);
            o.setMomentum(0.9);
            o.setBatchSize(64);
            o.setMaxIterations(10);
            try (ShardedOptimizer opt = make.make(new MomentumOptimizer(o), new ShardingConfiguration(b))) {
                opt.initialize(MODEL.layout(), MODEL.initialParameters());
                long before = opt.getBytesSent();
                opt.optimize(MODEL, new OptimizationInputData(MODEL.samples));
                long sent = opt.getBytesSent() - before;
                return new double[] {fullLoss(opt.getParametersFloat()), sent, opt.getMemoryStats().compressionBytes};
            }
        });
        for (double[] r : res) assertEquals(res.get(0)[0], r[0], 1e-6 * res.get(0)[0], "replicas agree");
        return res.get(0);
    }

    static double fullLoss(float[] params) { return MODEL.loss(params); }

    @Test
    void enableGradientCompressionAndLowBandwidth() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-compression")) {
            ShardingConfiguration c = new ShardingConfiguration(b);
            assertFalse(c.getEnableGradientCompression());
            assertEquals(GradientCompression.NONE, c.getGradientCompression()); // the library's field: none until enabled
            c.setEnableGradientCompression(true);
            assertEquals(GradientCompression.INT8, c.getGradientCompression()); // what createForLowBandwidth turns on
            assertEquals(0.1, c.getCompressionRatio());
            assertTrue(c.getErrorFeedback());
            assertEquals(4, c.getPowerSgdRank());
            c.setEnableGradientCompression(true);
            c.setGradientCompression(GradientCompression.TOP_K);
            assertEquals(GradientCompression.TOP_K, c.getGradientCompression());
            ShardingConfiguration low = ShardingConfiguration.createForLowBandwidth(b);
            assertTrue(low.getEnableGradientCompression());
            assertEquals(GradientCompression.INT8, low.getGradientCompression());
            assertEquals(4096, low.getMinimumParameterGroupSize());
            assertFalse(ShardingConfiguration.createForHighBandwidth(b).getEnableGradientCompression());
        }
    }

    @Test
    void compressedTrainingReachesUncompressedLossWithFewerBytes() {
        double[] base = trainCompressed(DDPOptimizer::new);
        double[] quant = trainCompressed(GradientCompressionOptimizer::new);
        double[] sparse = trainCompressed((w, c) -> new GradientCompressionOptimizer(w, c, 0.1, true, true));
        double[] viaConfig = trainCompressed((w, c) -> { c.setEnableGradientCompression(true); return new DDPOptimizer(w, c); });
        // 80 steps take the demo close to zero loss; compressed training must get there too
        double initial = fullLoss(MODEL.initialParameters());
        for (double[] r : new double[][] {base, quant, sparse}) assertTrue(r[0] < 0.01 * initial, "trained: " + r[0] + " from " + initial);
        System.out.printf("compression: loss %.3g, int8 %+.3f%%, top-k %+.3f%%; bytes %d, int8 %.2fx fewer, top-k %.2fx fewer%n",
                          base[0], 100 * (quant[0] / base[0] - 1), 100 * (sparse[0] / base[0] - 1), (long) base[1],
                          base[1] / quant[1], base[1] / sparse[1]);
        assertTrue(quant[0] <= base[0] * 1.02, "int8 " + quant[0] + " vs " + base[0]);
        assertTrue(sparse[0] <= base[0] * 1.05, "top-k " + sparse[0] + " vs " + base[0]);
        assertTrue(quant[1] * 3 <= base[1], "int8 bytes " + quant[1] + " vs " + base[1]);
        assertTrue(sparse[1] < base[1], "top-k bytes " + sparse[1] + " vs " + base[1]);
        assertEquals(quant[1], viaConfig[1]);                 // int8 either way
        assertEquals(quant[0], viaConfig[0], 1e-9);
        assertEquals(0.0, base[2]);
        assertTrue(quant[2] > 0, "compression bytes in the memory stats");
    }

    @Test
    void gradientCompressionOptimizerMethodsAndPowerSgdMatrices() {
        List<long[]> res = Ranks.run(2, b -> {
            ShardingConfiguration c = new ShardingConfiguration(b, 0.1);
            StochasticGradientDescentOptimizer sgd = new StochasticGradientDescentOptimizer();
            assertEquals(GradientCompression.TOP_K, new GradientCompressionOptimizer(sgd, c, 0.1, true, true).getCompression());
            assertEquals(GradientCompression.NONE, new GradientCompressionOptimizer(sgd, c, 0.1, false, false).getCompression());
            IShardedOptimizer i = new GradientCompressionOptimizer(sgd, c);
            assertSame(sgd, i.getWrappedOptimizer());
            // PowerSGD approximates tensors declared with addMatrix; a flat tensor of the same size goes uncompressed
            ShardingConfiguration p = new ShardingConfiguration(b, 0.1);
            p.setEnableGradientCompression(true);
            p.setGradientCompression(GradientCompression.POWER_SGD);
            p.setPowerSgdRank(2);
            long[] sent = new long[2];
            ParameterLayout[] lays = {new ParameterLayout().addMatrix("w", 64, 64), new ParameterLayout().add("w", 64 * 64)};
            java.util.Random rng = new java.util.Random(b.getRank());
            for (int k = 0; k < 2; ++k) {
                try (DDPOptimizer o = new DDPOptimizer(sgd, p, lays[k], null)) {
                    for (int step = 0; step < 4; ++step) {
                        o.zeroGrad();
                        NativeView g = o.getBucketGradient(0);
                        for (int e = 0; e < 64 * 64; ++e) g.set(e, (float) rng.nextGaussian());
                        long n = o.step().bytesSent;
                        if (step > 0) sent[k] += n; // not the first (creation's broadcast)
                    }
                }
            }
            return sent;
        });
        assertTrue(res.get(0)[0] * 4 < res.get(0)[1], "PowerSGD " + res.get(0)[0] + " vs flat " + res.get(0)[1]);
    }

    @Test
    void invalidCompressionSettingsThrow() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-compression-errors")) {
            ShardingConfiguration c = new ShardingConfiguration(b);
            for (double bad : new double[] {0, -0.1, 1.5, Double.NaN}) {
                assertThrows(IllegalArgumentException.class, () -> c.setCompressionRatio(bad));
                assertThrows(IllegalArgumentException.class,
                             () -> new GradientCompressionOptimizer(new AdamOptimizer(), c, bad, true, false));
            }
            assertThrows(IllegalArgumentException.class, () -> c.setPowerSgdRank(0));
            assertThrows(NullPointerException.class, () -> c.setGradientCompression(null));
            assertThrows(IllegalArgumentException.class, () -> new ParameterLayout().addMatrix("w", 0, 4));
            assertEquals(0.1, c.getCompressionRatio()); // unchanged by the failed sets
        }
    }

    @Test
    void defaultsMatchLibrary() {
        assertEquals(1e-3, new AdamOptimizerOptions().getLearningRate(), 1e-12);
        assertEquals(0.01, new AdamWOptimizerOptions().getWeightDecay(), 1e-12);
        assertEquals(0.9, new MomentumOptimizerOptions().getMomentum(), 1e-12);
        assertEquals(0.9, new RootMeanSquarePropagationOptimizerOptions().getDecay(), 1e-12); // AiDotNet's, the library's preset
        assertEquals(1e-6, new LambOptimizerOptions().getEpsilon(), 1e-12);
        assertEquals(0.01, new StochasticGradientDescentOptimizerOptions().getInitialLearningRate(), 1e-12);
        AdamOptimizerOptions o = new AdamOptimizerOptions(); // AiDotNet's training defaults, from shardopt_training_options_init
        assertEquals(100, o.getMaxIterations());
        assertEquals(32, o.getBatchSize());
        assertTrue(o.getShuffleData());
        assertTrue(o.getUseEarlyStopping());
        assertEquals(10, o.getEarlyStoppingPatience());
        assertEquals(1e-6, o.getTolerance(), 0.0);
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
