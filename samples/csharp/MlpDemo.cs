// The demo model of the C# samples and tests (compiled into them, not part of Shardopt.dll): a 2-layer MLP.
using System;

namespace Shardopt.DistributedTraining
{
    /// <summary>The demo model: a 2-layer MLP (ReLU, softmax cross-entropy) on synthetic Gaussian blobs;
    /// parameters packed fc1.weight, fc1.bias, fc2.weight, fc2.bias.</summary>
    public sealed class MlpDemo
    {
        public readonly int Inputs, Hidden, Classes, Samples;
        readonly double[,] x;
        readonly int[] y;
        readonly int w1, b1, w2, b2, n;

        public MlpDemo(int inputs = 16, int hidden = 32, int classes = 4, int samples = 512)
        {
            Inputs = inputs; Hidden = hidden; Classes = classes; Samples = samples;
            w1 = 0; b1 = hidden * inputs; w2 = b1 + hidden; b2 = w2 + classes * hidden; n = b2 + classes;
            var rng = new Random(7);
            Func<double> normal = () => Math.Sqrt(-2 * Math.Log(1 - rng.NextDouble())) * Math.Cos(2 * Math.PI * rng.NextDouble());
            var centers = new double[classes, inputs];
            for (int c = 0; c < classes; ++c) for (int f = 0; f < inputs; ++f) centers[c, f] = normal() * 2;
            x = new double[samples, inputs];
            y = new int[samples];
            for (int s = 0; s < samples; ++s)
            {
                y[s] = rng.Next(classes);
                for (int f = 0; f < inputs; ++f) x[s, f] = centers[y[s], f] + normal();
            }
        }

        /// <summary>The weights are matrices (out x in, row-major): PowerSGD compression can approximate them.</summary>
        public ParameterLayout Layout() => new ParameterLayout().AddMatrix("fc1.weight", Hidden, Inputs).Add("fc1.bias", Hidden).EndBucket()
            .AddMatrix("fc2.weight", Classes, Hidden).Add("fc2.bias", Classes).EndBucket();

        public float[] InitialParameters()
        {
            var rng = new Random(11);
            var p = new float[n];
            double s1 = 1 / Math.Sqrt(Inputs), s2 = 1 / Math.Sqrt(Hidden);
            for (int i = 0; i < n; ++i) p[i] = (float)((rng.NextDouble() * 2 - 1) * (i < w2 ? s1 : s2));
            return p;
        }

        /// <summary>The GradientModel: mean loss over samples, mean gradient into g.</summary>
        public double Evaluate(ReadOnlySpan<float> p, Span<float> g, ReadOnlySpan<long> idx, Dataset dataset = Dataset.Training)
        {
            double loss = 0;
            var hid = new double[Hidden]; var pre = new double[Hidden]; var logits = new double[Classes]; var dh = new double[Hidden];
            var acc = new double[n];
            for (int k = 0; k < idx.Length; ++k)
            {
                int s = (int)idx[k];
                for (int h = 0; h < Hidden; ++h)
                {
                    double a = p[b1 + h];
                    for (int f = 0; f < Inputs; ++f) a += p[w1 + h * Inputs + f] * x[s, f];
                    pre[h] = a; hid[h] = a > 0 ? a : 0;
                }
                double max = -1e300, sum = 0;
                for (int c = 0; c < Classes; ++c)
                {
                    double a = p[b2 + c];
                    for (int h = 0; h < Hidden; ++h) a += p[w2 + c * Hidden + h] * hid[h];
                    logits[c] = a; max = Math.Max(max, a);
                }
                for (int c = 0; c < Classes; ++c) sum += (logits[c] = Math.Exp(logits[c] - max));
                loss -= Math.Log(Math.Max(logits[y[s]] / sum, 1e-300));
                Array.Clear(dh, 0, Hidden);
                for (int c = 0; c < Classes; ++c)
                {
                    double d = logits[c] / sum - (c == y[s] ? 1 : 0);
                    acc[b2 + c] += d;
                    for (int h = 0; h < Hidden; ++h) { acc[w2 + c * Hidden + h] += d * hid[h]; dh[h] += d * p[w2 + c * Hidden + h]; }
                }
                for (int h = 0; h < Hidden; ++h)
                {
                    if (pre[h] <= 0) continue;
                    acc[b1 + h] += dh[h];
                    for (int f = 0; f < Inputs; ++f) acc[w1 + h * Inputs + f] += dh[h] * x[s, f];
                }
            }
            int m = Math.Max(idx.Length, 1);
            for (int i = 0; i < n; ++i) g[i] = (float)(acc[i] / m);
            return loss / m;
        }
    }
}
