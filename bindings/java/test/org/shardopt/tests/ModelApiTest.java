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
            if (g != null) { // null: the loss only (validation, test, the best solution's scores)
                for (int j = 0; j < D; ++j) g.set(j, gw[j] / (double) samples.length);
                g.set(D, gb / (double) samples.length);
            }
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
            opts.setShuffleData(shuffleSeed != null); // the library's default shuffles (seed 0)
            if (shuffleSeed != null) opts.setRandomSeed(shuffleSeed);
            AdamOptimizer<Double, double[][], double[]> adam = new AdamOptimizer<>(model, opts);
            ShardingConfiguration<Double> config = new ShardingConfiguration<>(b);
            OptimizationInputData<Double, double[][], double[]> in = model.data(64);
            if (validation) { in.XValidation = Linear.x(64, 16); in.YValidation = Linear.y(in.XValidation); }
            try (ShardedOptimizer<Double, double[][], double[]> o = strategy.equals("fsdp") ? new FSDPOptimizer<>(adam, config)
                                                                     : new DDPOptimizer<>(adam, config)) {
                OptimizationResult r = o.optimize(in);
                assertEquals(5, r.getIterations()); // epochs
                assertEquals(20, r.getSteps());
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
        assertArrayEquals(ref, train("fsdp", true, null), "FSDP with validation data (the same training trajectory)");
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
        double[] v = r.getValidationLossHistory();
        assertEquals(6, v.length);
        assertArrayEquals(v, r.getFitnessHistory()); // with validation data the score is the validation loss
        assertEquals(Arrays.stream(v).min().getAsDouble(), r.getBestFitnessScore());
        assertEquals(r.getBestFitnessScore(), v[r.getBestEpoch()]);
        assertEquals(r.getBestFitnessScore(), r.getValidationResult().getLoss(), 1e-12);
        assertEquals(64, r.getTrainingResult().getSampleCount());
        assertEquals(16, r.getValidationResult().getSampleCount());
        assertEquals(8, r.getTestResult().getSampleCount());
        assertTrue(r.getTrainingResult().getLoss() < r.getTrainingLossHistory()[0]);
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
        AdamOptimizerOptions<Double, double[][], double[]> bad = new AdamOptimizerOptions<>();
        SafetyTest.contains(assertThrows(IllegalArgumentException.class, () -> bad.setLearningRateSchedule(LearningRateSchedule.warmup(0))),
                            "SHARDOPT_ERR_INVALID_ARGUMENT", "warmup must be >= 1");
        assertNull(bad.getLearningRateSchedule()); // refused: unchanged
        Ranks.run(2, b -> {
            Linear model = new Linear();
            AdamOptimizerOptions<Double, double[][], double[]> opts = new AdamOptimizerOptions<>();
            opts.setInitialLearningRate(0.1);
            opts.setMaxIterations(4);
            opts.setBatchSize(32);
            opts.setLearningRateSchedule(LearningRateSchedule.warmup(4)); // the library's formula: base (t + 1) / warmup
            try (FSDPOptimizer<Double, double[][], double[]> o = new FSDPOptimizer<>(new AdamOptimizer<>(model, opts), new ShardingConfiguration<>(b))) {
                assertArrayEquals(new double[] {0.1 * 1 / 4, 0.1 * 2 / 4, 0.1 * 3 / 4, 0.1 * 4 / 4}, o.optimize(model.data(32)).getLearningRateHistory(), 1e-15);
                List<Double> seen = new ArrayList<>();
                opts.setLearningRateSchedule(LearningRateSchedule.custom((t, base) -> { seen.add(base); return base / (t + 1); }));
                o.setLearningRate(0.1);
                double[] rates = o.optimize(model.data(32)).getLearningRateHistory();
                assertEquals(List.of(0.1, 0.1, 0.1, 0.1), seen);
                assertArrayEquals(new double[] {0.1, 0.05, 0.1 / 3, 0.025}, rates, 1e-15);
                o.setLearningRate(0.01);
                assertEquals(0.01, o.getLearningRate(), 0.0);
                o.setLearningRate(0.2);
                byte[] ckpt;
                try { ckpt = o.serialize(); } catch (java.io.IOException e) { throw new RuntimeException(e); }
                o.setLearningRate(0.003);
                try { o.deserialize(ckpt); } catch (java.io.IOException e) { throw new RuntimeException(e); }
                assertEquals(0.2, o.getLearningRate(), 0.0); // the checkpoint's rate, right after a load
                // AiDotNet's GetOptions().LearningRate = x applies from the next step or optimize, as in C# and Python
                opts.setLearningRateSchedule(null);
                o.getOptions().setLearningRate(0.05);
                assertEquals(0.05, o.getLearningRate(), 0.0);
                o.zeroGrad();
                o.step();
                assertEquals(0.05, o.getLearningRate(), 0.0);
                o.setLearningRate(0.3); // a rate set since holds until the options change again
                o.zeroGrad();
                o.step();
                assertEquals(0.3, o.getLearningRate(), 0.0);
                opts.setLearningRate(0.02);
                assertArrayEquals(new double[] {0.02, 0.02, 0.02, 0.02}, o.optimize(model.data(32)).getLearningRateHistory(), 0.0);
                opts.setLearningRate(0.07); // changed before a load: the checkpoint's rate wins
                try { o.deserialize(ckpt); } catch (java.io.IOException e) { throw new RuntimeException(e); }
                assertEquals(0.2, o.getLearningRate(), 0.0);
            }
            return null;
        });
    }

    @Test
    void nanLossIsReported() {
        // rank 0's loss turns NaN at its 5th training batch (2 steps of 4 samples per epoch): epoch 3, step 5 (issue 32:
        // it was reported as "epoch 1, iteration 1" in C# and Python)
        Throwable[] errs = Ranks.runAll(2, b -> {
            AdamOptimizerOptions<Float, Object, Object> o = new AdamOptimizerOptions<>();
            o.setBatchSize(4);
            o.setMaxIterations(5);
            int[] calls = {0};
            try (DDPOptimizer<Float, Object, Object> d = new DDPOptimizer<>(new AdamOptimizer<>(o), new ShardingConfiguration<>(b),
                                                                           new ParameterLayout().add("w", 4), null)) {
                d.optimize((p, g, s, set) -> g != null && ++calls[0] == 5 ? Double.NaN : 1.0, new OptimizationInputData<>(8));
            }
        });
        for (Throwable e : errs) {
            assertTrue(e instanceof IllegalStateException, String.valueOf(e));
            SafetyTest.contains(e, "SHARDOPT_ERR_INVALID_STATE", "the training loss is NaN at epoch 3, step 5");
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

    /** T = Float: the same model over float32 parameters (new ParameterLayout(): its element type follows T). */
    static final class LinearF32 implements IGradientModel<Float, double[][], double[]> {
        final Linear f64 = new Linear();
        float[] fparams = new float[Linear.D + 1];
        @Override public ParameterLayout getParameterLayout() { return new ParameterLayout().add("weight", Linear.D).add("bias", 1); }
        @Override public Object getParameters() { return fparams.clone(); }
        @Override public void setParameters(Object p) { fparams = ((float[]) p).clone(); }
        @Override public long getSampleCount(double[][] x) { return x.length; }
        @Override public double computeLossAndGradient(NativeView p, NativeView g, double[][] x, double[] y, long[] s) {
            return f64.computeLossAndGradient(p, g, x, y, s);
        }
    }

    @Test
    void float32ModelAndCheckpointsInBothTypes() throws Exception {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("shardopt-java-f64");
        try {
            Ranks.run(2, b -> {
                for (boolean f32 : new boolean[] {true, false}) {
                    IGradientModel model = f32 ? new LinearF32() : new Linear();
                    AdamOptimizerOptions opts = new AdamOptimizerOptions();
                    opts.setLearningRate(0.05);
                    opts.setMaxIterations(3);
                    opts.setBatchSize(16);
                    try (ZeRO1Optimizer<Double, double[][], double[]> o = new ZeRO1Optimizer<>(new AdamOptimizer<>(model, opts), new ShardingConfiguration<>(b))) {
                        OptimizationResult r = o.optimize(new Linear().data(64));
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
        StochasticGradientDescentOptimizerOptions opts = new StochasticGradientDescentOptimizerOptions();
        opts.setBatchSize(0); // the whole set
        opts.setMaxIterations(2);
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-reset");
             DDPOptimizer o = new DDPOptimizer(new StochasticGradientDescentOptimizer(opts), new ShardingConfiguration(b, 0.5),
                                               new ParameterLayout().add("w", 2), new float[] {1, 2})) {
            o.optimize((p, g, s, d) -> { if (g != null) g.set(0, 1); return 1.0; }, new OptimizationInputData(4));
            assertEquals(2, o.getStepCount());
            NativeView old = o.getParameters();
            o.reset();
            assertEquals(0, o.getStepCount());
            assertArrayEquals(new float[] {1, 2}, o.getParametersFloat());
            assertThrows(IllegalStateException.class, () -> old.get(0));
        }
    }
}
