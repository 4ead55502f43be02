package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.shardopt.*;

/**
 * Pipeline parallelism from Java: a 4-layer tanh MLP cut into 2 stages (threads as ranks, the in-process
 * backend) trains under GPipe, 1F1B and interleaved 1F1B to the parameters of the same SGD in one process (f64,
 * <= 1e-12); a stage that throws, and activations of the wrong size, fail every stage with a clear error.
 */
class PipelineTest {
    static final int[] WIDTHS = {3, 4, 4, 4, 2}; // layer l: WIDTHS[l] -> WIDTHS[l + 1]; tanh after all but the last
    static final int LAYERS = 4, SAMPLES = 16, MICRO = 4, PER = SAMPLES / MICRO, STEPS = 4;
    static final double LR = 0.1;

    static double x(int i, int j) { return ((i * 7 + j * 3) % 11) / 5.0 - 1.0; }
    static double y(int i, int o) { return ((i * 5 + o * 2) % 7) / 3.0 - 1.0; }

    static double[] initialWeight(int l) {
        double[] w = new double[WIDTHS[l + 1] * WIDTHS[l]];
        for (int i = 0; i < w.length; ++i) w[i] = ((l * 31 + i * 7) % 19) / 19.0 - 0.5;
        return w;
    }

    static double[] initialBias(int l) {
        double[] b = new double[WIDTHS[l + 1]];
        for (int i = 0; i < b.length; ++i) b[i] = ((l * 13 + i * 5) % 7) / 14.0 - 0.25;
        return b;
    }

    static double[] samples(int mb) {
        double[] a = new double[PER * WIDTHS[0]];
        for (int s = 0; s < PER; ++s)
            for (int j = 0; j < WIDTHS[0]; ++j) a[s * WIDTHS[0] + j] = x(mb * PER + s, j);
        return a;
    }

    /** a (PER x in) -> PER x out: a W^T + b, then tanh unless l is the model's last layer. */
    static double[] layerForward(int l, double[] w, double[] b, double[] a) {
        int in = WIDTHS[l], out = WIDTHS[l + 1];
        double[] z = new double[PER * out];
        for (int s = 0; s < PER; ++s)
            for (int o = 0; o < out; ++o) {
                double v = 0;
                for (int i = 0; i < in; ++i) v += a[s * in + i] * w[o * in + i];
                v += b[o];
                z[s * out + o] = l == LAYERS - 1 ? v : Math.tanh(v);
            }
        return z;
    }

    /** 0.5 * mean over the micro-batch of |out - y|^2 into loss[0]; its gradient wrt out. */
    static double[] lossGrad(int mb, double[] out, double[] loss) {
        int n = WIDTHS[LAYERS];
        double[] d = new double[out.length];
        double sum = 0;
        for (int s = 0; s < PER; ++s)
            for (int o = 0; o < n; ++o) {
                double diff = out[s * n + o] - y(mb * PER + s, o);
                sum += diff * diff;
                d[s * n + o] = diff / PER;
            }
        loss[0] = 0.5 * sum / PER;
        return d;
    }

    /** Back through layer l: aIn its input, aOut its output, d the gradient of aOut (of the pre-activation on
     *  the model's last layer). Adds into gw, gb; returns the gradient of aIn. */
    static double[] layerBackward(int l, double[] w, double[] aIn, double[] aOut, double[] d, double[] gw, double[] gb) {
        int in = WIDTHS[l], out = WIDTHS[l + 1];
        double[] dz = d.clone();
        if (l != LAYERS - 1)
            for (int k = 0; k < dz.length; ++k) dz[k] *= 1.0 - aOut[k] * aOut[k];
        double[] din = new double[PER * in];
        for (int o = 0; o < out; ++o)
            for (int i = 0; i < in; ++i) {
                double v = 0;
                for (int s = 0; s < PER; ++s) v += dz[s * out + o] * aIn[s * in + i];
                gw[o * in + i] += v;
            }
        for (int o = 0; o < out; ++o) {
            double v = 0;
            for (int s = 0; s < PER; ++s) v += dz[s * out + o];
            gb[o] += v;
        }
        for (int s = 0; s < PER; ++s)
            for (int i = 0; i < in; ++i) {
                double v = 0;
                for (int o = 0; o < out; ++o) v += dz[s * out + o] * w[o * in + i];
                din[s * in + i] = v;
            }
        return din;
    }

    /** The same SGD in one process: per layer {weight, bias} after STEPS batches. */
    static double[][][] reference() {
        double[][][] p = new double[LAYERS][][];
        for (int l = 0; l < LAYERS; ++l) p[l] = new double[][] {initialWeight(l), initialBias(l)};
        for (int step = 0; step < STEPS; ++step) {
            double[][][] g = new double[LAYERS][][];
            for (int l = 0; l < LAYERS; ++l) g[l] = new double[][] {new double[p[l][0].length], new double[p[l][1].length]};
            for (int mb = 0; mb < MICRO; ++mb) {
                double[][] acts = new double[LAYERS + 1][];
                acts[0] = samples(mb);
                for (int l = 0; l < LAYERS; ++l) acts[l + 1] = layerForward(l, p[l][0], p[l][1], acts[l]);
                double[] d = lossGrad(mb, acts[LAYERS], new double[1]);
                for (int l = LAYERS - 1; l >= 0; --l) d = layerBackward(l, p[l][0], acts[l], acts[l + 1], d, g[l][0], g[l][1]);
            }
            for (int l = 0; l < LAYERS; ++l)
                for (int k = 0; k < 2; ++k)
                    for (int i = 0; i < p[l][k].length; ++i) p[l][k][i] -= LR * (g[l][k][i] / MICRO);
        }
        return p;
    }

    /** Pipeline rank `rank` of `stages`, holding model chunks rank, rank + stages, ...; each a run of layers. The
     *  backward recomputes the chunk's forward from its input. */
    static class MlpStage implements PipelineStage<double[]> {
        final List<int[]> layers = new ArrayList<>(); // per local chunk
        final int[] tensorOf = new int[LAYERS];        // layer -> its weight's tensor (the bias follows)

        MlpStage(int rank, int stages, int virtual) {
            int chunks = stages * virtual, t = 0;
            for (int c = 0; c < virtual; ++c) {
                int k = c * stages + rank, from = k * LAYERS / chunks, to = (k + 1) * LAYERS / chunks;
                int[] ls = new int[to - from];
                for (int i = 0; i < ls.length; ++i) {
                    ls[i] = from + i;
                    tensorOf[from + i] = t;
                    t += 2;
                }
                layers.add(ls);
            }
        }

        ParameterLayout layout() {
            ParameterLayout layout = new ParameterLayout(ParameterLayout.Precision.FLOAT64);
            for (int[] ls : layers)
                for (int l : ls) layout.addMatrix("fc" + l + ".weight", WIDTHS[l + 1], WIDTHS[l]).add("fc" + l + ".bias", WIDTHS[l + 1]);
            return layout;
        }

        double[] initial() {
            List<Double> v = new ArrayList<>();
            for (int[] ls : layers)
                for (int l : ls) {
                    for (double d : initialWeight(l)) v.add(d);
                    for (double d : initialBias(l)) v.add(d);
                }
            return v.stream().mapToDouble(Double::doubleValue).toArray();
        }

        double[][] run(PipelineCall call, double[] input) {
            int[] ls = layers.get(call.getChunk());
            double[][] acts = new double[ls.length + 1][];
            acts[0] = call.isFirst() ? samples(call.getMicroBatch()) : input;
            for (int i = 0; i < ls.length; ++i) {
                int t = tensorOf[ls[i]];
                acts[i + 1] = layerForward(ls[i], call.parameters(t).toDoubleArray(), call.parameters(t + 1).toDoubleArray(), acts[i]);
            }
            return acts;
        }

        @Override
        public double[] forward(PipelineCall call, double[] input) {
            double[][] acts = run(call, input);
            if (!call.isLast()) return acts[acts.length - 1];
            double[] loss = new double[1];
            lossGrad(call.getMicroBatch(), acts[acts.length - 1], loss);
            call.setLoss(loss[0]);
            return null;
        }

        @Override
        public double[] backward(PipelineCall call, double[] input, double[] outputGradient) {
            int[] ls = layers.get(call.getChunk());
            double[][] acts = run(call, input);
            double[] d = call.isLast() ? lossGrad(call.getMicroBatch(), acts[acts.length - 1], new double[1]) : outputGradient;
            for (int i = ls.length - 1; i >= 0; --i) {
                int l = ls[i], t = tensorOf[l];
                double[] gw = new double[WIDTHS[l + 1] * WIDTHS[l]], gb = new double[WIDTHS[l + 1]];
                d = layerBackward(l, call.parameters(t).toDoubleArray(), acts[i], acts[i + 1], d, gw, gb);
                NativeView vw = call.gradient(t), vb = call.gradient(t + 1);
                for (int k = 0; k < gw.length; ++k) vw.add(k, gw[k]);
                for (int k = 0; k < gb.length; ++k) vb.add(k, gb[k]);
            }
            return call.isFirst() ? null : d;
        }
    }

    static HybridShardedOptimizer<Double, Object, Object> optimizer(CommunicationBackend b, MlpStage stage, int stages) {
        StochasticGradientDescentOptimizerOptions o = new StochasticGradientDescentOptimizerOptions();
        o.setLearningRate(LR);
        HybridShardedOptimizer<Double, Object, Object> opt = new HybridShardedOptimizer<>(
            new StochasticGradientDescentOptimizer<>(o), new ShardingConfiguration<>(b), stages, 1, -1);
        opt.initialize(stage.layout(), stage.initial());
        return opt;
    }

    void trainsLikeOneProcess(PipelineSchedule schedule, int virtual) {
        double[][][] want = reference();
        List<double[]> out = Ranks.run(2, b -> {
            b.setTimeout(30000);
            MlpStage stage = new MlpStage(b.getRank(), 2, virtual);
            try (HybridShardedOptimizer<Double, Object, Object> opt = optimizer(b, stage, 2);
                 PipelineRunner<double[]> runner = new PipelineRunner<>(opt, stage, MICRO, schedule)) {
                PipelineBatchResult r = null;
                for (int step = 0; step < STEPS; ++step) {
                    r = runner.runBatch();
                    assertTrue(r.stepApplied);
                    assertTrue(r.loss > 0);
                }
                assertEquals(MICRO * (2 * virtual - 1), r.sends); // activations out and gradients back; one end open
                if (schedule == PipelineSchedule.GPIPE) assertEquals(MICRO, r.peakActivations);
                if (schedule == PipelineSchedule.ONE_F_ONE_B) assertEquals(2 - b.getRank(), r.peakActivations);
                double[] params = opt.getParametersDouble();
                double diff = 0;
                int off = 0;
                for (int[] ls : stage.layers)
                    for (int l : ls)
                        for (double[] t : want[l])
                            for (double v : t) diff = Math.max(diff, Math.abs(params[off++] - v));
                assertEquals(params.length, off);
                return new double[] {diff, r.loss};
            }
        });
        for (int r = 0; r < 2; ++r) assertTrue(out.get(r)[0] <= 1e-12, "rank " + r + ": max abs diff " + out.get(r)[0]);
        assertEquals(out.get(0)[1], out.get(1)[1]); // both stages report the last chunk's loss
    }

    @Test void gpipeEqualsSingleProcess() { trainsLikeOneProcess(PipelineSchedule.GPIPE, 1); }
    @Test void oneFOneBEqualsSingleProcess() { trainsLikeOneProcess(PipelineSchedule.ONE_F_ONE_B, 1); }
    @Test void interleavedEqualsSingleProcess() { trainsLikeOneProcess(PipelineSchedule.INTERLEAVED_1F1B, 2); }

    static final class ChainBroke extends RuntimeException {
        ChainBroke(String m) { super(m); }
    }

    /** Runs a 2-stage batch (twice when `twice`) with the given stage per rank; returns each rank's exception. */
    static Throwable[] failing(java.util.function.Function<Integer, MlpStage> stageOf, boolean twice) {
        long t0 = System.nanoTime();
        Throwable[] errors = Ranks.runAll(2, b -> {
            MlpStage stage = stageOf.apply(b.getRank());
            try (HybridShardedOptimizer<Double, Object, Object> opt = optimizer(b, stage, 2);
                 PipelineRunner<double[]> runner = new PipelineRunner<>(opt, stage, MICRO, PipelineSchedule.ONE_F_ONE_B)) {
                runner.runBatch();
                if (twice) runner.runBatch();
            }
        });
        assertTrue(System.nanoTime() - t0 < 15_000_000_000L, "the failure took the communicator's timeout");
        return errors;
    }

    @Test
    void exceptionInAStageFailsEveryStage() {
        Throwable[] e = failing(rank -> new MlpStage(rank, 2, 1) {
            @Override
            public double[] backward(PipelineCall call, double[] input, double[] outputGradient) {
                if (call.getModelChunk() == 1 && call.getMicroBatch() == 1) throw new ChainBroke("the chain broke");
                return super.backward(call, input, outputGradient);
            }
        }, false);
        assertTrue(e[1] instanceof ChainBroke, String.valueOf(e[1])); // the stage's own exception, rethrown
        assertTrue(e[0] instanceof IllegalStateException, String.valueOf(e[0]));
        assertTrue(e[0].getMessage().contains("ChainBroke: the chain broke"), e[0].getMessage());
    }

    @Test
    void wrongActivationSizeFailsEveryStage() {
        Throwable[] e = failing(rank -> new MlpStage(rank, 2, 1) {
            int forwards;
            @Override
            public double[] forward(PipelineCall call, double[] input) {
                double[] out = super.forward(call, input);
                if (call.getModelChunk() == 0 && ++forwards > MICRO) return java.util.Arrays.copyOf(out, out.length + 1);
                return out;
            }
        }, true);
        for (Throwable t : e) {
            assertTrue(t instanceof IllegalStateException, String.valueOf(t));
            assertTrue(t.getMessage().contains("SHARDOPT_ERR_MISMATCH") && t.getMessage().contains("output 17 elements")
                       && t.getMessage().contains("agreed 16"), t.getMessage());
        }
    }

    @Test
    void wrongInputGradientSizeFailsEveryStage() {
        Throwable[] e = failing(rank -> new MlpStage(rank, 2, 1) {
            @Override
            public double[] backward(PipelineCall call, double[] input, double[] outputGradient) {
                double[] g = super.backward(call, input, outputGradient);
                return g == null ? null : java.util.Arrays.copyOf(g, g.length - 1);
            }
        }, false);
        assertTrue(e[1] instanceof IllegalArgumentException, String.valueOf(e[1]));
        assertTrue(e[1].getMessage().contains("returned 15 elements for an input of 16"), e[1].getMessage());
        assertTrue(e[0] instanceof IllegalStateException && e[0].getMessage().contains("returned 15 elements"), String.valueOf(e[0]));
    }

    @Test
    void misuseIsRefused() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-pipe-misuse")) {
            MlpStage stage = new MlpStage(0, 1, 1);
            HybridShardedOptimizer<Double, Object, Object> opt = optimizer(b, stage, 1);
            // a stage of float[] activations for float64 parameters
            PipelineStage<float[]> floats = new PipelineStage<float[]>() {
                public float[] forward(PipelineCall call, float[] input) { return input; }
                public float[] backward(PipelineCall call, float[] input, float[] g) { return g; }
            };
            IllegalArgumentException wrongType = assertThrows(IllegalArgumentException.class, () -> new PipelineRunner<>(opt, floats));
            assertTrue(wrongType.getMessage().contains("PipelineStage<float[]>") && wrongType.getMessage().contains("FLOAT64"),
                       wrongType.getMessage());
            assertThrows(IllegalArgumentException.class, () -> new PipelineRunner<>(opt, stage, -1, PipelineSchedule.GPIPE));
            // views handed to a stage die with its call; the optimizer refuses changes during a batch
            List<NativeView> kept = new ArrayList<>();
            List<Throwable> refused = new ArrayList<>();
            MlpStage keeper = new MlpStage(0, 1, 1) {
                @Override
                public double[] backward(PipelineCall call, double[] input, double[] outputGradient) {
                    kept.add(call.gradient(0));
                    try { opt.zeroGrad(); } catch (IllegalStateException e) { refused.add(e); }
                    return super.backward(call, input, outputGradient);
                }
            };
            try (PipelineRunner<double[]> runner = new PipelineRunner<>(opt, keeper, MICRO, PipelineSchedule.GPIPE)) {
                assertTrue(runner.runBatch().stepApplied);
            }
            IllegalStateException stale = assertThrows(IllegalStateException.class, () -> kept.get(0).get(0));
            assertTrue(stale.getMessage().contains("the stage call returned"), stale.getMessage());
            assertEquals(MICRO, refused.size());
            assertTrue(refused.get(0).getMessage().contains("not while a pipeline batch is running"), refused.get(0).getMessage());
            PipelineRunner<double[]> runner = new PipelineRunner<>(opt, stage, MICRO, PipelineSchedule.GPIPE);
            opt.close();
            assertThrows(IllegalStateException.class, runner::runBatch);
            runner.close();
            IllegalStateException closed = assertThrows(IllegalStateException.class, runner::runBatch);
            assertTrue(closed.getMessage().contains("PipelineRunner was closed"), closed.getMessage());
        }
    }
}
