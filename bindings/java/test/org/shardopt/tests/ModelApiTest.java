package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.shardopt.*;

/** Issue 19, part 1: the AiDotNet-shaped model API, float64 end to end, the f64 path equal to the C++ core's
 *  bit for bit, shuffling, early stopping, learning-rate schedules, and the rest of ICommunicationBackend. */
class ModelApiTest {
    /** The reference model of tests/bindings/reference_f64.cpp, in the same arithmetic order. */
    static class Linear implements IGradientModel<Double, double[][], double[]> {
        static final int D = 8;
        double[] params = new double[D + 1];

        static double[][] x(int from, int n) {
            double[][] x = new double[n][D];
            for (int i = 0; i < n; ++i) for (int j = 0; j < D; ++j) x[i][j] = (double) ((7 * (from + i) + 3 * j) % 11 - 5) / 8.0;
            return x;
        }

        static double[] y(double[][] x) {
            double[] y = new double[x.length];
            for (int i = 0; i < x.length; ++i) {
                double acc = 0.0;
                for (int j = 0; j < D; ++j) acc += 0.125 * (double) (j + 1) * x[i][j];
                y[i] = acc + 0.25;
            }
            return y;
        }

        OptimizationInputData<Double, double[][], double[]> data(int n) {
            OptimizationInputData<Double, double[][], double[]> in = new OptimizationInputData<>();
            in.XTrain = x(0, n);
            in.YTrain = y(in.XTrain);
            return in;
        }

        @Override public ParameterLayout getParameterLayout() {
            return new ParameterLayout(ParameterLayout.Precision.FLOAT64).add("weight", D).add("bias", 1);
        }
        @Override public Object getParameters() { return params.clone(); }
        @Override public void setParameters(Object p) { params = ((double[]) p).clone(); }
        @Override public long getSampleCount(double[][] x) { return x.length; }

        @Override
        public double computeLossAndGradient(NativeView pv, NativeView g, double[][] x, double[] y, long[] samples) {
            double[] p = new double[pv.size()];
            for (int i = 0; i < p.length; ++i) p[i] = pv.get(i); // float32 or float64 views alike
            double loss = 0.0, gb = 0.0;
            double[] gw = new double[D];
            for (long s : samples) {
                int i = (int) s;
                double pred = 0.0;
                for (int j = 0; j < D; ++j) pred += p[j] * x[i][j];
                double err = pred + p[D] - y[i];
                loss += 0.5 * err * err;
                for (int j = 0; j < D; ++j) gw[j] += err * x[i][j];
                gb += err;
            }
            for (int j = 0; j < D; ++j) g.set(j, gw[j] / (double) samples.length);
            g.set(D, gb / (double) samples.length);
            return loss / (double) samples.length;
        }
    }

    static long[] reference(String... args) throws Exception {
        String bin = System.getenv("SHARDOPT_REFERENCE_F64");
        Assumptions.assumeTrue(bin != null, "SHARDOPT_REFERENCE_F64 not set");
        List<String> cmd = new ArrayList<>(List.of(bin));
        cmd.addAll(Arrays.asList(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        List<Long> bits = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
            for (String line; (line = r.readLine()) != null; ) bits.add(Long.parseLong(line.trim()));
        }
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue());
        return bits.stream().mapToLong(Long::longValue).toArray();
    }

    /** Trains the reference model through optimize(OptimizationInputData) on 4 in-memory ranks. */
    static long[] train(String strategy, boolean validation, Long shuffleSeed) {
        List<long[]> res = Ranks.run(4, b -> {
            Linear model = new Linear();
            AdamOptimizerOptions opts = new AdamOptimizerOptions();
            opts.setLearningRate(0.05);
            opts.setBatchSize(16);
            opts.setMaxIterations(5);
            if (shuffleSeed != null) { opts.setShuffleData(true); opts.setSeed(shuffleSeed); }
            AdamOptimizer<Double, double[][], double[]> adam = new AdamOptimizer<>(model, opts);
            ShardingConfiguration<Double> config = new ShardingConfiguration<>(b);
            OptimizationInputData<Double, double[][], double[]> in = model.data(64);
            if (validation) { in.XValidation = Linear.x(64, 16); in.YValidation = Linear.y(in.XValidation); }
            try (ShardedOptimizer<Double, double[][], double[]> o = strategy.equals("fsdp") ? new FSDPOptimizer<>(adam, config)
                                                                     : new DDPOptimizer<>(adam, config)) {
                OptimizationResult r = o.optimize(in);
                assertEquals(20, r.getIterations());
                return Arrays.stream(o.getParametersDouble()).mapToLong(Double::doubleToRawLongBits).toArray();
            }
        });
        for (long[] r : res) assertArrayEquals(res.get(0), r);
        return res.get(0);
    }

    @Test
    void f64BitForBitWithTheCore() throws Exception {
        long[] ref = reference();
        assertEquals(9, ref.length);
        assertArrayEquals(ref, train("fsdp", false, null), "FSDP, one optimize call");
        assertArrayEquals(ref, train("fsdp", true, null), "FSDP, epoch by epoch (validation data)");
        assertArrayEquals(reference("--strategy", "ddp"), train("ddp", false, null), "DDP");
        assertArrayEquals(reference("--shuffle-seed", "7"), train("fsdp", false, 7L), "shuffled with seed 7");
    }

    @Test
    void validationChoosesTheBestAndResultsAreScored() {
        List<OptimizationResult> res = Ranks.run(2, b -> {
            Linear model = new Linear();
            AdamOptimizerOptions opts = new AdamOptimizerOptions();
            opts.setLearningRate(0.05);
            opts.setBatchSize(16);
            opts.setMaxIterations(6);
            OptimizationInputData<Double, double[][], double[]> in = model.data(64);
            in.XValidation = Linear.x(64, 16); in.YValidation = Linear.y(in.XValidation);
            in.XTest = Linear.x(80, 8); in.YTest = Linear.y(in.XTest);
            try (ZeRO2Optimizer<Double, double[][], double[]> o = new ZeRO2Optimizer<>(new AdamOptimizer<>(model, opts),
                                                                                    new ShardingConfiguration<>(b))) {
                OptimizationResult r = o.optimize(in);
                assertArrayEquals((double[]) r.getBestSolution(), model.params); // the model received the best solution
                return r;
            }
        });
        OptimizationResult r = res.get(0);
        double[] v = r.getValidationHistory();
        assertEquals(6, v.length);
        assertEquals(Arrays.stream(v).min().getAsDouble(), r.getBestFitnessScore());
        assertEquals(r.getBestFitnessScore(), r.getValidationResult().getLoss(), 1e-12);
        assertEquals(64, r.getTrainingResult().getSampleCount());
        assertEquals(16, r.getValidationResult().getSampleCount());
        assertEquals(8, r.getTestResult().getSampleCount());
        assertTrue(r.getTrainingResult().getLoss() < r.getFitnessHistory()[0]);
        assertArrayEquals((double[]) r.getBestSolution(), (double[]) res.get(1).getBestSolution());
    }

    @Test
    void earlyStoppingAndShouldEarlyStop() {
        List<boolean[]> res = Ranks.run(2, b -> {
            Linear model = new Linear();
            AdamOptimizerOptions opts = new AdamOptimizerOptions();
            opts.setMaxIterations(50);
            opts.setBatchSize(16);
            opts.setUseEarlyStopping(true);
            opts.setEarlyStoppingPatience(2);
            opts.setTolerance(1e9); // nothing counts as an improvement
            OptimizationInputData<Double, double[][], double[]> in = model.data(32);
            in.XValidation = Linear.x(64, 8); in.YValidation = Linear.y(in.XValidation);
            try (DDPOptimizer<Double, double[][], double[]> o = new DDPOptimizer<>(new AdamOptimizer<>(model, opts), new ShardingConfiguration<>(b))) {
                OptimizationResult r = o.optimize(in);
                assertEquals(3, r.getFitnessHistory().length);
                return new boolean[] {r.getStoppedEarly(), o.shouldEarlyStop()};
            }
        });
        for (boolean[] r : res) { assertTrue(r[0]); assertTrue(r[1]); }
    }

    @Test
    void learningRateScheduleAndLiveRate() throws Exception {
        assertEquals(0.5, LearningRateSchedule.warmup(4).learningRate(1, 1.0), 1e-15);
        assertEquals(1.0, LearningRateSchedule.warmup(4).learningRate(7, 1.0), 1e-15);
        assertEquals(0.5, LearningRateSchedule.cosine(10, 0.0).learningRate(5, 1.0), 1e-12);
        assertEquals(0.25, LearningRateSchedule.stepDecay(2, 0.5).learningRate(4, 1.0), 1e-15);
        assertThrows(IllegalArgumentException.class, () -> LearningRateSchedule.warmup(0));
        Ranks.run(2, b -> {
            Linear model = new Linear();
            AdamOptimizerOptions opts = new AdamOptimizerOptions();
            opts.setLearningRate(0.1);
            opts.setMaxIterations(4);
            opts.setBatchSize(32);
            List<Double> seen = new ArrayList<>();
            double[] live = new double[4];
            try (FSDPOptimizer<Double, double[][], double[]> o = new FSDPOptimizer<>(new AdamOptimizer<>(model, opts), new ShardingConfiguration<>(b))) {
                opts.setLearningRateSchedule((e, base) -> { seen.add(base); live[e] = base / (e + 1); return live[e]; });
                o.optimize(model.data(32));
                assertEquals(List.of(0.1, 0.1, 0.1, 0.1), seen);
                assertEquals(0.1, o.getLearningRate(), 0.0); // back to the base rate after optimize
                o.setLearningRate(0.01);
                assertEquals(0.01, o.getLearningRate(), 0.0);
                o.getOptions().setLearningRate(0.2); // GetOptions() changes reach the library
                assertEquals(0.2, o.getLearningRate(), 0.0);
                byte[] ckpt;
                try { ckpt = o.serialize(); } catch (java.io.IOException e) { throw new RuntimeException(e); }
                o.setLearningRate(0.003);
                try { o.deserialize(ckpt); } catch (java.io.IOException e) { throw new RuntimeException(e); }
                assertEquals(0.2, o.getLearningRate(), 0.0); // the checkpoint's rate, right after a load
            }
            return null;
        });
    }

    @Test
    void nanLossIsReported() {
        Throwable[] errs = Ranks.runAll(2, b -> {
            try (DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), new ParameterLayout().add("w", 4), null)) {
                o.optimize((p, g, s) -> Double.NaN, new OptimizationInputData(8, 4, 3));
            }
        });
        for (Throwable e : errs) {
            assertTrue(e instanceof IllegalStateException, String.valueOf(e));
            SafetyTest.contains(e, "SHARDOPT_ERR_INVALID_STATE", "the loss is NaN at epoch");
        }
    }

    @Test
    void collectivesInBothElementTypes() {
        Ranks.run(3, b -> {
            int r = b.getRank();
            double[] d = {r, 10 + r};
            assertArrayEquals(new double[] {0, 10, 1, 11, 2, 12}, b.allGather(d));
            float[] f = {r};
            assertArrayEquals(new float[] {0, 1, 2}, b.allGather(f));
            double[] all = {1, 2, 3, 4, 5, 6};
            assertArrayEquals(new double[] {3 * (2 * r + 1), 3 * (2 * r + 2)}, b.reduceScatter(all, ReductionOperation.SUM));
            float[] fa = {1, 2, 3};
            assertArrayEquals(new float[] {3 * (r + 1)}, b.reduceScatter(fa, ReductionOperation.SUM));
            double[] src = r == 1 ? new double[] {0, 0.5, 1, 1.5, 2, 2.5} : null;
            assertArrayEquals(new double[] {r, r + 0.5}, b.scatter(src, 1));
            float[] fsrc = r == 0 ? new float[] {7, 8, 9} : null;
            assertArrayEquals(new float[] {7 + r}, b.scatter(fsrc));
            double[] bc = {r == 2 ? 42 : 0};
            b.broadcast(bc, 2);
            assertEquals(42, bc[0]);
            if (r == 0) { b.send(new double[] {1.5, 2.5}, 1, 3); b.send(new float[] {4f}, 2, 0); }
            if (r == 1) assertArrayEquals(new double[] {1.5, 2.5}, b.receive(0, 2, 3));
            if (r == 2) assertArrayEquals(new float[] {4f}, b.receiveFloat(0, 1, 0));
            b.initialize();
            b.barrier();
            return null;
        });
    }

    /** T = Float: the same model over float32 parameters. */
    static final class LinearF32 extends Linear {
        float[] fparams = new float[D + 1];
        @Override public ParameterLayout getParameterLayout() { return new ParameterLayout().add("weight", D).add("bias", 1); }
        @Override public Object getParameters() { return fparams.clone(); }
        @Override public void setParameters(Object p) { fparams = ((float[]) p).clone(); }
    }

    @Test
    void float32ModelAndCheckpointsInBothTypes() throws Exception {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("shardopt-java-f64");
        try {
            Ranks.run(2, b -> {
                for (boolean f32 : new boolean[] {true, false}) {
                    Linear model = f32 ? new LinearF32() : new Linear();
                    AdamOptimizerOptions opts = new AdamOptimizerOptions();
                    opts.setLearningRate(0.05);
                    opts.setMaxIterations(3);
                    opts.setBatchSize(16);
                    try (ZeRO1Optimizer<Double, double[][], double[]> o = new ZeRO1Optimizer<>(new AdamOptimizer<>(model, opts), new ShardingConfiguration<>(b))) {
                        OptimizationResult r = o.optimize(model.data(64));
                        double[] h = r.getFitnessHistory();
                        assertTrue(h[2] < h[0], Arrays.toString(h));
                        assertTrue(f32 ? r.getBestSolution() instanceof float[] : r.getBestSolution() instanceof double[]);
                        Object before = o.packedParameters();
                        String d = dir.resolve(f32 ? "f32" : "f64").toString();
                        try { o.saveModel(d); } catch (java.io.IOException e) { throw new RuntimeException(e); }
                        if (f32) o.setParameters(new float[9]); else o.setParameters(new double[9]);
                        try { o.loadModel(d); } catch (java.io.IOException e) { throw new RuntimeException(e); }
                        if (f32) assertArrayEquals((float[]) before, o.getParametersFloat());
                        else assertArrayEquals((double[]) before, o.getParametersDouble());
                    }
                }
                return null;
            });
        } finally {
            try (var w = java.nio.file.Files.walk(dir)) {
                w.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    @Test
    void resetStartsOver() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-reset");
             DDPOptimizer o = new DDPOptimizer(new StochasticGradientDescentOptimizer(), new ShardingConfiguration(b, 0.5),
                                               new ParameterLayout().add("w", 2), new float[] {1, 2})) {
            o.optimize((p, g, s) -> { g.put(0, 1f); return 1.0; }, new OptimizationInputData(4, 0, 2));
            assertEquals(2, o.getStepCount());
            NativeView old = o.getParameters();
            o.reset();
            assertEquals(0, o.getStepCount());
            assertArrayEquals(new float[] {1, 2}, o.getParametersFloat());
            assertThrows(IllegalStateException.class, () -> old.get(0));
        }
    }
}
