package org.shardopt.samples;

import java.util.Random;
import org.shardopt.Dataset;
import org.shardopt.GradientModel;
import org.shardopt.NativeView;
import org.shardopt.ParameterLayout;

/** The demo model of the samples and tests: a 2-layer MLP (ReLU, softmax cross-entropy) on synthetic Gaussian blobs;
 *  parameters packed fc1.weight, fc1.bias, fc2.weight, fc2.bias (float32), a GradientModel over sample indices. */
public final class MlpDemo implements GradientModel {
    public final int inputs, hidden, classes, samples;
    private final double[][] x;
    private final int[] y;
    private final int b1, w2, b2, n;

    public MlpDemo() { this(16, 32, 4, 512); }

    public MlpDemo(int inputs, int hidden, int classes, int samples) {
        this.inputs = inputs; this.hidden = hidden; this.classes = classes; this.samples = samples;
        b1 = hidden * inputs; w2 = b1 + hidden; b2 = w2 + classes * hidden; n = b2 + classes;
        Random rng = new Random(7);
        double[][] centers = new double[classes][inputs];
        for (double[] c : centers) for (int f = 0; f < inputs; ++f) c[f] = rng.nextGaussian() * 2;
        x = new double[samples][inputs];
        y = new int[samples];
        for (int s = 0; s < samples; ++s) {
            y[s] = rng.nextInt(classes);
            for (int f = 0; f < inputs; ++f) x[s][f] = centers[y[s]][f] + rng.nextGaussian();
        }
    }

    public ParameterLayout layout() {
        // the weights are matrices (out x in, row-major): PowerSGD compression can approximate them
        return new ParameterLayout().addMatrix("fc1.weight", hidden, inputs).add("fc1.bias", hidden).endBucket()
            .addMatrix("fc2.weight", classes, hidden).add("fc2.bias", classes).endBucket();
    }

    public float[] initialParameters() {
        Random rng = new Random(11);
        float[] p = new float[n];
        double s1 = 1 / Math.sqrt(inputs), s2 = 1 / Math.sqrt(hidden);
        for (int i = 0; i < n; ++i) p[i] = (float) ((rng.nextDouble() * 2 - 1) * (i < w2 ? s1 : s2));
        return p;
    }

    @Override
    public double evaluate(NativeView params, NativeView grad, long[] idx, Dataset dataset) {
        float[] p = params.toFloatArray(), g = new float[n];
        double loss = evaluate(p, g, idx);
        if (grad != null) grad.copyFrom(g);
        return loss;
    }

    /** The mean loss over samples idx at p and its gradient into g. */
    public double evaluate(float[] p, float[] g, long[] idx) {
        double loss = 0;
        double[] hid = new double[hidden], pre = new double[hidden], logits = new double[classes], dh = new double[hidden];
        double[] gacc = new double[n];
        for (long sample : idx) {
            int s = (int) sample;
            for (int h = 0; h < hidden; ++h) {
                double a = p[b1 + h];
                for (int f = 0; f < inputs; ++f) a += p[h * inputs + f] * x[s][f];
                pre[h] = a;
                hid[h] = a > 0 ? a : 0;
            }
            double max = -1e300, sum = 0;
            for (int c = 0; c < classes; ++c) {
                double a = p[b2 + c];
                for (int h = 0; h < hidden; ++h) a += p[w2 + c * hidden + h] * hid[h];
                logits[c] = a;
                max = Math.max(max, a);
            }
            for (int c = 0; c < classes; ++c) sum += (logits[c] = Math.exp(logits[c] - max));
            loss -= Math.log(Math.max(logits[y[s]] / sum, 1e-300));
            java.util.Arrays.fill(dh, 0);
            for (int c = 0; c < classes; ++c) {
                double d = logits[c] / sum - (c == y[s] ? 1 : 0);
                gacc[b2 + c] += d;
                for (int h = 0; h < hidden; ++h) {
                    gacc[w2 + c * hidden + h] += d * hid[h];
                    dh[h] += d * p[w2 + c * hidden + h];
                }
            }
            for (int h = 0; h < hidden; ++h) {
                if (pre[h] <= 0) continue;
                gacc[b1 + h] += dh[h];
                for (int f = 0; f < inputs; ++f) gacc[h * inputs + f] += dh[h] * x[s][f];
            }
        }
        int m = Math.max(idx.length, 1);
        for (int i = 0; i < n; ++i) g[i] = (float) (gacc[i] / m);
        return loss / m;
    }

    /** The mean loss over every sample at p. */
    public double loss(float[] p) {
        long[] all = new long[samples];
        for (int i = 0; i < samples; ++i) all[i] = i;
        return evaluate(p, new float[n], all);
    }
}
