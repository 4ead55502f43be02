package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.shardopt.*;

/** Issue 32: one training policy in C. The options are the library's (defaults, checks); the ported example's types
 *  (generic options, Tensor, the layout's element type from T); optimize after close; a lost in-process peer; a call
 *  from another thread; the status and rank on exceptions. */
class Issue32Test {
    @Test
    void optimizeAfterCloseThrowsInsteadOfTrainingAgain() {
        try (InMemoryCommunicationBackend<Double> b = new InMemoryCommunicationBackend<>(0, 1, "java-closed-optimize")) {
            ModelApiTest.Linear model = new ModelApiTest.Linear();
            AdamOptimizerOptions<Double, double[][], double[]> o = new AdamOptimizerOptions<>();
            o.setMaxIterations(2);
            FSDPOptimizer<Double, double[][], double[]> f = new FSDPOptimizer<>(new AdamOptimizer<>(model, o), new ShardingConfiguration<>(b));
            f.optimize(model.data(16));
            double[] trained = model.params.clone();
            f.close();
            SafetyTest.contains(assertThrows(IllegalStateException.class, () -> f.optimize(model.data(16))),
                                "optimize(inputData) after close()", "FSDPOptimizer was closed");
            assertArrayEquals(trained, model.params); // nothing trained again
            assertFalse(f.isInitialized());
        }
    }

    /** A rank that closes its backend, or whose thread throws (closing it) before optimize, fails the others at once. */
    @Test
    void lostInProcessPeerFailsTheOthersAtOnce() {
        for (boolean throwsFirst : new boolean[] {false, true}) {
            long t0 = System.nanoTime();
            Throwable[] errs = Ranks.runAll(3, b -> {
                b.setTimeout(60_000);
                if (b.getRank() == 1) {
                    if (throwsFirst) throw new IllegalStateException("rank 1 gave up"); // runAll closes its backend
                    b.close();
                    return;
                }
                ModelApiTest.Linear model = new ModelApiTest.Linear();
                try (DDPOptimizer<Double, double[][], double[]> d = new DDPOptimizer<>(new AdamOptimizer<>(model, new AdamOptimizerOptions<>()),
                                                                                     new ShardingConfiguration<>(b))) {
                    d.optimize(model.data(16));
                }
            });
            assertTrue(System.nanoTime() - t0 < 20_000_000_000L, "the peers waited for the timeout");
            for (int r : new int[] {0, 2}) {
                assertTrue(errs[r] instanceof IllegalStateException, String.valueOf(errs[r]));
                SafetyTest.contains(errs[r], "SHARDOPT_ERR_PEER_LOST", "rank 1");
                assertEquals(5, ((ShardoptException) errs[r]).getStatus()); // SHARDOPT_ERR_PEER_LOST
                assertEquals(r, ((ShardoptException) errs[r]).getRank());
            }
        }
    }

    @Test
    void callFromAnotherThreadWhileTrainingIsReportedAsSuch() {
        Throwable[] other = new Throwable[1];
        try (InMemoryCommunicationBackend<Float> b = new InMemoryCommunicationBackend<>(0, 1, "java-other-thread");
             DDPOptimizer<Float, Object, Object> d = new DDPOptimizer<>(new AdamOptimizer<>(), new ShardingConfiguration<>(b),
                                                                       new ParameterLayout().add("w", 4), null)) {
            d.getOptions().setMaxIterations(1);
            d.optimize((p, g, s, set) -> {
                Thread t = new Thread(() -> {
                    try { d.zeroGrad(); } catch (Throwable e) { other[0] = e; }
                });
                t.start();
                try { t.join(); } catch (InterruptedException e) { throw new RuntimeException(e); }
                return 1.0;
            }, new OptimizationInputData<>(4));
        }
        assertTrue(other[0] instanceof IllegalStateException, String.valueOf(other[0]));
        SafetyTest.contains(other[0], "SHARDOPT_ERR_INVALID_STATE", "called from another thread while this optimizer trains");
    }

    @Test
    void optionsAreTheLibrarysAndRefuseBadValuesAtOnce() {
        AdamOptimizerOptions<Double, Tensor<Double>, Tensor<Double>> o = new AdamOptimizerOptions<>();
        assertEquals(1e-3, o.getInitialLearningRate(), 0.0);
        Object[][] bad = {{(Runnable) () -> o.setMaxIterations(0), "max_epochs must be >= 1"},
                          {(Runnable) () -> o.setEarlyStoppingPatience(0), "patience must be >= 1"},
                          {(Runnable) () -> o.setTolerance(-1), "tolerance must be finite and >= 0"},
                          {(Runnable) () -> o.setBatchSize(-2), "batch_size must be >= 0"},
                          {(Runnable) () -> o.setInitialLearningRate(-0.5), "lr"},
                          {(Runnable) () -> o.setBeta1(1.5), "beta1"}};
        for (Object[] c : bad) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, ((Runnable) c[0])::run);
            SafetyTest.contains(e, "SHARDOPT_ERR_INVALID_ARGUMENT", (String) c[1]);
            assertEquals(1, ((ShardoptException) e).getStatus());
            assertEquals(-1, ((ShardoptException) e).getRank());
        }
        assertEquals(100, o.getMaxIterations()); // refused values change nothing
        assertEquals(32, o.getBatchSize());
        assertEquals(1e-3, o.getInitialLearningRate(), 0.0);
        try (InMemoryCommunicationBackend<Double> b = new InMemoryCommunicationBackend<>(0, 1, "java-config-checks")) {
            ShardingConfiguration<Double> c = new ShardingConfiguration<>(b);
            SafetyTest.contains(assertThrows(IllegalArgumentException.class, () -> c.setLearningRate(-1)), "learning_rate must be finite and >= 0");
            SafetyTest.contains(assertThrows(IllegalArgumentException.class, () -> c.setMinimumParameterGroupSize(-1)), "parameter_group_size");
            assertEquals(1024, c.getMinimumParameterGroupSize());
            assertEquals(512, ShardingConfiguration.createForHighBandwidth(b).getMinimumParameterGroupSize());
        }
    }

    /** AiDotNet's types: generic options, Tensor inputs, and a Double model's layout in float64 (new ParameterLayout()). */
    static final class TensorModel implements IGradientModel<Double, Tensor<Double>, Tensor<Double>> {
        final ParameterLayout layout;
        double[] params = new double[2];
        TensorModel(ParameterLayout layout) { this.layout = layout; }
        @Override public ParameterLayout getParameterLayout() { return layout; }
        @Override public Object getParameters() { return params.clone(); }
        @Override public void setParameters(Object p) { params = (double[]) p; }
        @Override public long getSampleCount(Tensor<Double> x) { return x.getShape()[0]; }
        @Override public double computeLossAndGradient(NativeView p, NativeView g, Tensor<Double> x, Tensor<Double> y, long[] samples) {
            double loss = 0;
            for (long s : samples) {
                double err = p.get(0) * x.get((int) s, 0) + p.get(1) - y.get((int) s);
                loss += err * err / 2;
                if (g != null) { g.add(0, err * x.get((int) s, 0) / samples.length); g.add(1, err / samples.length); }
            }
            return loss / samples.length;
        }
    }

    @Test
    void aDoubleModelTrainsInFloat64AndAWrongLayoutSaysSo() {
        Tensor<Double> x = Tensor.of(new int[] {4, 1}, new double[] {0, 1, 2, 3}), y = Tensor.of(new int[] {4}, new double[] {1, 3, 5, 7});
        assertEquals(5.0, y.get(2));
        assertThrows(IndexOutOfBoundsException.class, () -> y.get(4));
        assertThrows(IllegalArgumentException.class, () -> Tensor.of(new int[] {3}, new double[4]));
        List<Object> res = Ranks.run(2, b -> {
            TensorModel model = new TensorModel(new ParameterLayout().add("w", 1).add("b", 1));
            AdamOptimizerOptions<Double, Tensor<Double>, Tensor<Double>> o = new AdamOptimizerOptions<>();
            o.setInitialLearningRate(0.1);
            o.setMaxIterations(3);
            var f = new FSDPOptimizer<Double, Tensor<Double>, Tensor<Double>>(new AdamOptimizer<>(model, o), new ShardingConfiguration<>(b));
            OptimizationResult r = f.optimize(new OptimizationInputData<>(x, y));
            assertEquals(ParameterLayout.Precision.FLOAT64, f.getPrecision());
            assertTrue(r.getBestSolution() instanceof double[]);
            f.close();
            TensorModel wrong = new TensorModel(new ParameterLayout(ParameterLayout.Precision.FLOAT32).add("w", 1).add("b", 1));
            var g = new DDPOptimizer<Double, Tensor<Double>, Tensor<Double>>(new AdamOptimizer<>(wrong, o), new ShardingConfiguration<>(b));
            return assertThrows(IllegalArgumentException.class, () -> g.optimize(new OptimizationInputData<>(x, y)));
        });
        SafetyTest.contains((Throwable) res.get(0), "the model's T is Double but its ParameterLayout is FLOAT32", "new ParameterLayout()");
    }
}
