package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.junit.jupiter.api.Test;
import org.shardopt.*;

/** Issue 19, part 2: ordinary mistakes raise the language's exceptions instead of crashing or corrupting. */
class SafetyTest {
    static final ParameterLayout NINE = new ParameterLayout().add("w", 8).add("b", 1);

    static void contains(Throwable e, String... parts) {
        for (String p : parts) assertTrue(e.getMessage() != null && e.getMessage().contains(p), "'" + p + "' not in: " + e.getMessage());
    }

    @Test
    void shortArraysAreRejected() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-short");
             DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b))) {
            contains(assertThrows(IllegalArgumentException.class, () -> o.initialize(NINE, new float[3])),
                     "initial has 3 elements; the layout needs 9");
            o.initialize(NINE, new float[9]);
            contains(assertThrows(IllegalArgumentException.class, () -> o.setParameters(new float[3])), "values has 3 elements; the layout needs 9");
            contains(assertThrows(IllegalArgumentException.class, () -> o.setParameters(new float[12])), "values has 12 elements");
            contains(assertThrows(IllegalArgumentException.class, () -> o.getParameters(new float[3])), "out has 3 elements");
            contains(assertThrows(IllegalArgumentException.class, () -> o.getParameters(new float[9], 100)), "count is 100");
            FloatBuffer small = ByteBuffer.allocateDirect(12).order(ByteOrder.nativeOrder()).asFloatBuffer();
            contains(assertThrows(IllegalArgumentException.class, () -> o.setParameters(small)), "values has 3 elements");
            contains(assertThrows(IllegalArgumentException.class, () -> o.setParameters(FloatBuffer.allocate(9))), "must be a direct buffer");
            float[] p = o.getParametersFloat();
            for (float v : p) assertEquals(0f, v); // nothing was written by the rejected calls
        }
    }

    @Test
    void wrongElementTypeIsRejected() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-dtype");
             DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b))) {
            // a layout that names its element type (new ParameterLayout() takes the model's T, or the initial values')
            ParameterLayout nine32 = new ParameterLayout(ParameterLayout.Precision.FLOAT32).add("w", 8).add("b", 1);
            contains(assertThrows(IllegalArgumentException.class, () -> o.initialize(nine32, new double[9])),
                     "initial holds float64 elements but the layout is float32");
            o.initialize(NINE, null);
            contains(assertThrows(IllegalArgumentException.class, () -> o.setParameters(new double[9])), "holds float64 elements");
            contains(assertThrows(IllegalArgumentException.class, () -> o.getParameters(new double[9])), "holds float64 elements");
            contains(assertThrows(IllegalArgumentException.class, o::getParametersDouble), "FLOAT32");
            contains(assertThrows(IllegalArgumentException.class, () -> o.getParameters(new long[9])), "must be a float[], double[]");
            FloatBuffer bigEndian = ByteBuffer.allocateDirect(36).order(ByteOrder.BIG_ENDIAN).asFloatBuffer();
            if (ByteOrder.nativeOrder() != ByteOrder.BIG_ENDIAN) {
                contains(assertThrows(IllegalArgumentException.class, () -> o.setParameters(bigEndian)), "BIG_ENDIAN byte order");
                contains(assertThrows(IllegalArgumentException.class, () -> b.allReduce(bigEndian, ReductionOperation.SUM)), "BIG_ENDIAN byte order");
            }
            NativeView v = o.getTensorParameters(0);
            contains(assertThrows(IllegalArgumentException.class, () -> v.copyFrom(new double[8])), "FLOAT64", "FLOAT32");
            contains(assertThrows(IllegalArgumentException.class, () -> v.copyFrom(new float[3])), "3 elements, the view 8");
            assertThrows(IndexOutOfBoundsException.class, () -> v.get(8));
            assertThrows(IndexOutOfBoundsException.class, () -> v.set(-1, 0));
        }
        ParameterLayout f64 = new ParameterLayout(ParameterLayout.Precision.FLOAT64).add("w", 4);
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-dtype64");
             FSDPOptimizer o = new FSDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b))) {
            contains(assertThrows(IllegalArgumentException.class, () -> o.initialize(f64, new float[4])),
                     "initial holds float32 elements but the layout is float64");
            o.initialize(f64, new double[] {1, 2, 3, 4});
            assertArrayEquals(new double[] {1, 2, 3, 4}, o.getParametersDouble());
        }
    }

    @Test
    void viewsRaiseAfterClose() {
        NativeView params, grad, tensor;
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-views");
             DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), NINE, null)) {
            params = o.getParameters();
            grad = o.getBucketGradient(0);
            tensor = o.getTensorGradient(1);
            grad.set(0, 1.0);
            assertEquals(1.0, grad.get(0));
            assertTrue(params.isValid());
        }
        assertFalse(params.isValid());
        for (NativeView v : new NativeView[] {params, grad, tensor}) {
            contains(assertThrows(IllegalStateException.class, () -> v.get(0)), "no longer valid", "DDPOptimizer was closed");
            assertThrows(IllegalStateException.class, () -> v.set(0, 5.0));
            assertThrows(IllegalStateException.class, v::toFloatArray);
            assertThrows(IllegalStateException.class, () -> v.copyFrom(new float[v == tensor ? 1 : 9]));
            assertThrows(IllegalStateException.class, v::size);
        }
    }

    @Test
    void gatheredUnitRaisesAfterRelease() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-gather");
             FSDPOptimizer o = new FSDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), NINE, new float[9])) {
            NativeView u = o.gather(0);
            assertEquals(0.0, u.get(0));
            o.release(0);
            contains(assertThrows(IllegalStateException.class, () -> u.get(0)), "release(0) was called");
        }
    }

    @Test
    void callbackBuffersKeptAfterTheCallAreSafe() {
        NativeView[] kept = new NativeView[2];
        NativeView[] keptViews = new NativeView[2];
        AdamOptimizerOptions once = new AdamOptimizerOptions();
        once.setMaxIterations(1);
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-cb");
             DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(once), new ShardingConfiguration(b), NINE, null)) {
            o.optimize((p, g, s, d) -> {
                if (g == null) return 1.0;
                kept[0] = p;
                kept[1] = g;
                g.set(0, 1);
                assertThrows(java.nio.ReadOnlyBufferException.class, () -> p.set(0, 1)); // the parameters are read-only
                return 1.0;
            }, new OptimizationInputData(4));
        }
        // the views given to a callback (either form) raise once it returned, never touching freed memory
        contains(assertThrows(IllegalStateException.class, () -> kept[0].get(0)), "the model callback returned");
        assertThrows(IllegalStateException.class, () -> kept[1].set(0, 2));
        // the model form's views raise
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-cb2")) {
            ModelApiTest.Linear model = new ModelApiTest.Linear() {
                @Override public double computeLossAndGradient(NativeView p, NativeView g, double[][] x, double[] y, long[] s) {
                    if (keptViews[0] == null) { keptViews[0] = p; keptViews[1] = g; }
                    return super.computeLossAndGradient(p, g, x, y, s);
                }
            };
            AdamOptimizerOptions opts = new AdamOptimizerOptions();
            opts.setMaxIterations(1);
            try (DDPOptimizer<Double, double[][], double[]> o = new DDPOptimizer<>(new AdamOptimizer<>(model, opts), new ShardingConfiguration<>(b))) {
                o.optimize(model.data(16));
            }
        }
        contains(assertThrows(IllegalStateException.class, () -> keptViews[0].get(0)), "the model callback returned");
        assertThrows(IllegalStateException.class, () -> keptViews[1].set(0, 1.0));
    }

    @Test
    void negativeAndNullTensorSizes() {
        contains(assertThrows(IllegalArgumentException.class, () -> new ParameterLayout().add("w", -5)),
                 "tensor 'w': count must be >= 1 (got -5)");
        assertThrows(IllegalArgumentException.class, () -> new ParameterLayout().add("w", 0));
        assertThrows(NullPointerException.class, () -> new ParameterLayout().add(null, 3));
        contains(assertThrows(IllegalArgumentException.class, () -> new ParameterLayout().add("huge", 1L << 40)), "do not fit");
    }

    @Test
    void backendChecksItsArguments() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-comm-args")) {
            contains(assertThrows(IllegalArgumentException.class, () -> b.allReduce(FloatBuffer.allocate(4), ReductionOperation.SUM)),
                     "must be a direct buffer");
            assertThrows(NullPointerException.class, () -> b.allReduce((float[]) null, ReductionOperation.SUM));
            assertThrows(NullPointerException.class, () -> b.allReduce(new float[2], null));
            contains(assertThrows(IllegalArgumentException.class, () -> b.receive(0, -1, 0)), "count must be >= 0");
            contains(assertThrows(IllegalArgumentException.class, () -> b.scatter(new double[3], 5)), "root 5 outside");
        }
        InMemoryCommunicationBackend closed = new InMemoryCommunicationBackend(0, 1, "java-comm-closed");
        closed.close();
        contains(assertThrows(IllegalStateException.class, () -> closed.allReduce(new double[2], ReductionOperation.SUM)), "was closed");
        assertThrows(IllegalStateException.class, closed::getRank);
        assertThrows(IllegalStateException.class, closed::initialize);
        closed.close(); // twice is fine
    }

    interface Reentrant { void call(DDPOptimizer o, OptimizationInputData in); }

    /** A model callback that calls back into its optimizer: the library refuses instead of freeing or corrupting what its
     *  training loop uses (the callback's failure then aborts the group, as any model exception does). */
    @Test
    void closingOrSteppingFromTheModelCallbackRaises() {
        Reentrant[] cases = {
            (o, in) -> o.close(), (o, in) -> o.step(), (o, in) -> o.zeroGrad(), (o, in) -> o.reset(),
            (o, in) -> o.optimize((p2, g2, s2, d2) -> 1.0, in), (o, in) -> o.setParameters(new float[9])};
        int k = 0;
        for (Reentrant c : cases) {
            try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-reentrant-" + k++);
                 DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), NINE, null)) {
                OptimizationInputData in = new OptimizationInputData(4);
                contains(assertThrows(IllegalStateException.class, () -> o.optimize((p, g, s, d) -> { c.call(o, in); return 1.0; }, in)),
                         "SHARDOPT_ERR_INVALID_STATE", "called from inside this optimizer's training loop (its model callback)");
                assertEquals(9, o.getElementCount()); // not freed
            }
        }
    }

    @Test
    void scatterMistakeOnRootFailsEveryRankAtOnce() {
        Throwable[] errs = Ranks.runAll(2, b -> b.scatter(b.getRank() == 0 ? new double[3] : null, 0));
        assertTrue(errs[0] instanceof IllegalArgumentException, String.valueOf(errs[0]));
        contains(errs[0], "not a multiple of the world size 2");
        assertTrue(errs[1] instanceof IllegalArgumentException, String.valueOf(errs[1]));
        contains(errs[1], "root rank 0's data (3 elements) is not a multiple of the world size 2"); // the library's, on every rank
    }

    @Test
    void optimizerAfterCloseRaises() {
        InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-opt-closed");
        DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), NINE, null);
        o.close();
        b.close();
        contains(assertThrows(IllegalStateException.class, o::getParameters), "not initialized (or was closed)");
        assertThrows(IllegalStateException.class, o::step);
        assertThrows(IllegalStateException.class, () -> o.setParameters(new float[9]));
        o.close();
    }
}
