// Pipeline parallelism from C#: a 4-layer tanh MLP cut into 2 stages (threads as ranks, the in-process backend)
// trains under GPipe, 1F1B and interleaved 1F1B to the parameters of the same SGD in one process (double, <= 1e-12);
// a stage that throws, and activations of the wrong size, fail every stage with a clear error. Run with --group pipeline.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    static class Chain
    {
        internal static readonly int[] Widths = { 3, 4, 4, 4, 2 }; // layer l: Widths[l] -> Widths[l + 1]; tanh after all but the last
        internal const int Layers = 4, Samples = 16, Micro = 4, Per = Samples / Micro, Steps = 4;
        internal const double Lr = 0.1;

        static double X(int i, int j) => ((i * 7 + j * 3) % 11) / 5.0 - 1.0;
        static double Y(int i, int o) => ((i * 5 + o * 2) % 7) / 3.0 - 1.0;

        internal static double[] InitialWeight(int l) =>
            Enumerable.Range(0, Widths[l + 1] * Widths[l]).Select(i => ((l * 31 + i * 7) % 19) / 19.0 - 0.5).ToArray();
        internal static double[] InitialBias(int l) =>
            Enumerable.Range(0, Widths[l + 1]).Select(i => ((l * 13 + i * 5) % 7) / 14.0 - 0.25).ToArray();

        internal static double[] SamplesOf(int mb)
        {
            var a = new double[Per * Widths[0]];
            for (int s = 0; s < Per; ++s)
                for (int j = 0; j < Widths[0]; ++j) a[s * Widths[0] + j] = X(mb * Per + s, j);
            return a;
        }

        // a (Per x in) -> Per x out: a W^T + b, then tanh unless l is the model's last layer
        internal static double[] LayerForward(int l, ReadOnlySpan<double> w, ReadOnlySpan<double> b, double[] a)
        {
            int n = Widths[l], m = Widths[l + 1];
            var z = new double[Per * m];
            for (int s = 0; s < Per; ++s)
                for (int o = 0; o < m; ++o)
                {
                    double v = 0;
                    for (int i = 0; i < n; ++i) v += a[s * n + i] * w[o * n + i];
                    v += b[o];
                    z[s * m + o] = l == Layers - 1 ? v : Math.Tanh(v);
                }
            return z;
        }

        // 0.5 * mean over the micro-batch of |out - y|^2, and its gradient wrt out
        internal static double[] LossGrad(int mb, double[] output, out double loss)
        {
            int m = Widths[Layers];
            var d = new double[output.Length];
            double sum = 0;
            for (int s = 0; s < Per; ++s)
                for (int o = 0; o < m; ++o)
                {
                    double diff = output[s * m + o] - Y(mb * Per + s, o);
                    sum += diff * diff;
                    d[s * m + o] = diff / Per;
                }
            loss = 0.5 * sum / Per;
            return d;
        }

        // back through layer l (aIn its input, aOut its output, d the gradient of aOut, of the pre-activation on the
        // model's last layer); adds into gw, gb and returns the gradient of aIn
        internal static double[] LayerBackward(int l, ReadOnlySpan<double> w, double[] aIn, double[] aOut, double[] d, Span<double> gw, Span<double> gb)
        {
            int n = Widths[l], m = Widths[l + 1];
            var dz = (double[])d.Clone();
            if (l != Layers - 1) for (int k = 0; k < dz.Length; ++k) dz[k] *= 1.0 - aOut[k] * aOut[k];
            for (int o = 0; o < m; ++o)
                for (int i = 0; i < n; ++i)
                {
                    double v = 0;
                    for (int s = 0; s < Per; ++s) v += dz[s * m + o] * aIn[s * n + i];
                    gw[o * n + i] += v;
                }
            for (int o = 0; o < m; ++o)
            {
                double v = 0;
                for (int s = 0; s < Per; ++s) v += dz[s * m + o];
                gb[o] += v;
            }
            var din = new double[Per * n];
            for (int s = 0; s < Per; ++s)
                for (int i = 0; i < n; ++i)
                {
                    double v = 0;
                    for (int o = 0; o < m; ++o) v += dz[s * m + o] * w[o * n + i];
                    din[s * n + i] = v;
                }
            return din;
        }

        // the same SGD in one process: per layer { weight, bias } after Steps batches
        internal static double[][][] Reference()
        {
            var p = Enumerable.Range(0, Layers).Select(l => new[] { InitialWeight(l), InitialBias(l) }).ToArray();
            for (int step = 0; step < Steps; ++step)
            {
                var g = p.Select(t => new[] { new double[t[0].Length], new double[t[1].Length] }).ToArray();
                for (int mb = 0; mb < Micro; ++mb)
                {
                    var acts = new double[Layers + 1][];
                    acts[0] = SamplesOf(mb);
                    for (int l = 0; l < Layers; ++l) acts[l + 1] = LayerForward(l, p[l][0], p[l][1], acts[l]);
                    var d = LossGrad(mb, acts[Layers], out _);
                    for (int l = Layers - 1; l >= 0; --l) d = LayerBackward(l, p[l][0], acts[l], acts[l + 1], d, g[l][0], g[l][1]);
                }
                for (int l = 0; l < Layers; ++l)
                    for (int k = 0; k < 2; ++k)
                        for (int i = 0; i < p[l][k].Length; ++i) p[l][k][i] -= Lr * (g[l][k][i] / Micro);
            }
            return p;
        }
    }

    // Pipeline rank `rank` of `stages`, holding model chunks rank, rank + stages, ...; each a run of layers. The
    // backward recomputes the chunk's forward from its input.
    class MlpStage : PipelineStage<double>
    {
        internal readonly List<int[]> Layers = new List<int[]>(); // per local chunk
        readonly int[] tensorOf = new int[Chain.Layers];           // layer -> its weight's tensor (the bias follows)

        internal MlpStage(int rank, int stages, int virtualStages)
        {
            int chunks = stages * virtualStages, t = 0;
            for (int c = 0; c < virtualStages; ++c)
            {
                int k = c * stages + rank, from = k * Chain.Layers / chunks, to = (k + 1) * Chain.Layers / chunks;
                var ls = Enumerable.Range(from, to - from).ToArray();
                foreach (var l in ls) { tensorOf[l] = t; t += 2; }
                Layers.Add(ls);
            }
        }

        internal ParameterLayout Layout()
        {
            var layout = new ParameterLayout();
            foreach (var ls in Layers)
                foreach (var l in ls) layout.AddMatrix($"fc{l}.weight", Chain.Widths[l + 1], Chain.Widths[l]).Add($"fc{l}.bias", Chain.Widths[l + 1]);
            return layout;
        }

        internal double[] Initial() => Layers.SelectMany(ls => ls).SelectMany(l => Chain.InitialWeight(l).Concat(Chain.InitialBias(l))).ToArray();

        double[][] Run(PipelineCall<double> call, ReadOnlySpan<double> input)
        {
            var ls = Layers[call.Chunk];
            var acts = new double[ls.Length + 1][];
            acts[0] = call.IsFirst ? Chain.SamplesOf(call.MicroBatch) : input.ToArray();
            for (int i = 0; i < ls.Length; ++i)
                acts[i + 1] = Chain.LayerForward(ls[i], call.Parameters(tensorOf[ls[i]]), call.Parameters(tensorOf[ls[i]] + 1), acts[i]);
            return acts;
        }

        public override double[] Forward(PipelineCall<double> call, ReadOnlySpan<double> input)
        {
            var acts = Run(call, input);
            if (!call.IsLast) return acts[acts.Length - 1];
            Chain.LossGrad(call.MicroBatch, acts[acts.Length - 1], out double loss);
            call.Loss = loss;
            return null;
        }

        public override double[] Backward(PipelineCall<double> call, ReadOnlySpan<double> input, ReadOnlySpan<double> outputGradient)
        {
            var ls = Layers[call.Chunk];
            var acts = Run(call, input);
            var d = call.IsLast ? Chain.LossGrad(call.MicroBatch, acts[acts.Length - 1], out _) : outputGradient.ToArray();
            for (int i = ls.Length - 1; i >= 0; --i)
            {
                int t = tensorOf[ls[i]];
                d = Chain.LayerBackward(ls[i], call.Parameters(t), acts[i], acts[i + 1], d, call.Gradient(t), call.Gradient(t + 1));
            }
            return call.IsFirst ? null : d;
        }
    }

    static HybridShardedOptimizer<double> PipelineOptimizer(CommunicationBackend b, MlpStage stage, int stages)
    {
        var sgd = new StochasticGradientDescentOptimizer(new StochasticGradientDescentOptimizerOptions { LearningRate = Chain.Lr });
        var opt = new HybridShardedOptimizer<double>(sgd, new ShardingConfiguration(b), stages);
        opt.Initialize(stage.Layout(), stage.Initial());
        return opt;
    }

    static void PipelineTrainsLikeOneProcess(PipelineSchedule schedule, int virtualStages)
    {
        var want = Chain.Reference();
        var outs = Ranks(2, b =>
        {
            b.SetTimeout(30000);
            var stage = new MlpStage(b.Rank, 2, virtualStages);
            using (var opt = PipelineOptimizer(b, stage, 2))
            using (var runner = new PipelineRunner<double>(opt, stage, new PipelineOptions { NumMicroBatches = Chain.Micro, Schedule = schedule }))
            {
                PipelineBatchResult r = null;
                for (int step = 0; step < Chain.Steps; ++step)
                {
                    r = runner.RunBatch();
                    Assert(r.StepApplied && r.Loss > 0, "a step each batch, a positive loss");
                }
                Assert(r.Sends == Chain.Micro * (2 * virtualStages - 1), $"sends {r.Sends}"); // activations out, gradients back; one end open
                if (schedule == PipelineSchedule.GPipe) Assert(r.PeakActivations == Chain.Micro, $"GPipe peak {r.PeakActivations}");
                if (schedule == PipelineSchedule.OneFOneB) Assert(r.PeakActivations == 2 - b.Rank, $"1F1B peak {r.PeakActivations}");
                var got = opt.GetParameters();
                var expect = stage.Layers.SelectMany(ls => ls).SelectMany(l => want[l][0].Concat(want[l][1])).ToArray();
                Assert(got.Length == expect.Length, "this stage's parameters");
                return Tuple.Create(got.Zip(expect, (x, y) => Math.Abs(x - y)).Max(), r.Loss);
            }
        });
        for (int r = 0; r < 2; ++r) Assert(outs[r].Item1 <= 1e-12, $"{schedule} rank {r}: max abs diff {outs[r].Item1}");
        Assert(outs[0].Item2 == outs[1].Item2, "both stages report the last chunk's loss");
    }

    static void PipelineGPipeEqualsSingleProcess() => PipelineTrainsLikeOneProcess(PipelineSchedule.GPipe, 1);
    static void Pipeline1F1BEqualsSingleProcess() => PipelineTrainsLikeOneProcess(PipelineSchedule.OneFOneB, 1);
    static void PipelineInterleavedEqualsSingleProcess() => PipelineTrainsLikeOneProcess(PipelineSchedule.InterleavedOneFOneB, 2);

    sealed class ChainBrokeException : Exception { public ChainBrokeException(string m) : base(m) { } }

    sealed class ThrowingStage : MlpStage
    {
        public ThrowingStage(int rank) : base(rank, 2, 1) { }
        public override double[] Backward(PipelineCall<double> call, ReadOnlySpan<double> input, ReadOnlySpan<double> outputGradient)
        {
            if (call.ModelChunk == 1 && call.MicroBatch == 1) throw new ChainBrokeException("the chain broke");
            return base.Backward(call, input, outputGradient);
        }
    }

    sealed class ResizingStage : MlpStage
    {
        int forwards;
        public ResizingStage(int rank) : base(rank, 2, 1) { }
        public override double[] Forward(PipelineCall<double> call, ReadOnlySpan<double> input)
        {
            var output = base.Forward(call, input);
            if (call.ModelChunk == 0 && ++forwards > Chain.Micro) return output.Concat(new[] { 0.0 }).ToArray();
            return output;
        }
    }

    sealed class ShortGradientStage : MlpStage
    {
        public ShortGradientStage(int rank) : base(rank, 2, 1) { }
        public override double[] Backward(PipelineCall<double> call, ReadOnlySpan<double> input, ReadOnlySpan<double> outputGradient)
        {
            var g = base.Backward(call, input, outputGradient);
            return g?.Take(g.Length - 1).ToArray();
        }
    }

    // Runs 2-stage batches (`batches` of them) with the stage each rank makes; returns each rank's exception.
    static Exception[] PipelineFailures(Func<int, MlpStage> stageOf, int batches)
    {
        var sw = Stopwatch.StartNew();
        var errors = RanksAll(2, b =>
        {
            var stage = stageOf(b.Rank);
            using (var opt = PipelineOptimizer(b, stage, 2))
            using (var runner = new PipelineRunner<double>(opt, stage, new PipelineOptions { NumMicroBatches = Chain.Micro }))
                for (int i = 0; i < batches; ++i) runner.RunBatch();
            return 0;
        }).Item2;
        Assert(sw.Elapsed.TotalSeconds < 15, "the failure took the communicator's timeout");
        return errors;
    }

    static void PipelineExceptionFailsEveryStage()
    {
        var e = PipelineFailures(r => new ThrowingStage(r), 1);
        Assert(e[1] is ChainBrokeException && e[1].Message == "the chain broke", $"rank 1 rethrows its stage's exception: {e[1]}");
        Assert(e[0] is InvalidOperationException && e[0].Message.Contains("ChainBrokeException: the chain broke"), $"rank 0: {e[0]}");
    }

    static void PipelineWrongActivationSizeFailsEveryStage()
    {
        var e = PipelineFailures(r => new ResizingStage(r), 2);
        foreach (var x in e)
            Assert(x is InvalidOperationException && x.Message.Contains("SHARDOPT_ERR_MISMATCH") && x.Message.Contains("output 17 elements")
                   && x.Message.Contains("agreed 16"), $"{x}");
        var g = PipelineFailures(r => new ShortGradientStage(r), 1);
        Assert(g[1] is ArgumentException && g[1].Message.Contains("returned 15 elements for an input of 16"), $"rank 1: {g[1]}");
        Assert(g[0] is InvalidOperationException && g[0].Message.Contains("returned 15 elements"), $"rank 0: {g[0]}");
    }

    sealed class KeepingStage : MlpStage
    {
        internal PipelineCall<double> Kept;
        internal ShardedOptimizer Opt;
        internal Exception Refused;
        public KeepingStage() : base(0, 1, 1) { }
        public override double[] Backward(PipelineCall<double> call, ReadOnlySpan<double> input, ReadOnlySpan<double> outputGradient)
        {
            Kept = call;
            try { Opt.Dispose(); } catch (InvalidOperationException e) { Refused = e; }
            return base.Backward(call, input, outputGradient);
        }
    }

    static void PipelineMisuseRefused()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-pipe-misuse"))
        {
            var stage = new MlpStage(0, 1, 1);
            var opt = PipelineOptimizer(b, stage, 1);
            Throws<ArgumentNullException>(() => new PipelineRunner<double>(opt, null));
            Throws<ArgumentException>(() => new PipelineRunner<float>(opt, new FloatStage()));
            // the library's check of the pipeline options
            Assert(Throws<ArgumentException>(() => new PipelineRunner<double>(opt, stage, new PipelineOptions { NumMicroBatches = -1 })).Message.Contains("num_micro_batches must be >= 0"), "micro-batches");
            var keeper = new KeepingStage { Opt = opt };
            using (var runner = new PipelineRunner<double>(opt, keeper, new PipelineOptions { NumMicroBatches = Chain.Micro, Schedule = PipelineSchedule.GPipe }))
                Assert(runner.RunBatch().StepApplied, "a single stage steps");
            Assert(keeper.Refused != null && keeper.Refused.Message.Contains("not while a pipeline batch is running"), $"Dispose during a batch: {keeper.Refused}");
            var stale = Throws<ObjectDisposedException>(() => keeper.Kept.Gradient(0));
            Assert(stale.Message.Contains("the stage call returned"), stale.Message);
            var later = new PipelineRunner<double>(opt, stage);
            opt.Dispose();
            Throws<ObjectDisposedException>(() => later.RunBatch());
            later.Dispose();
            Throws<ObjectDisposedException>(() => later.RunBatch());
        }
    }

    sealed class FloatStage : PipelineStage<float>
    {
        public override float[] Forward(PipelineCall<float> call, ReadOnlySpan<float> input) => null;
        public override float[] Backward(PipelineCall<float> call, ReadOnlySpan<float> input, ReadOnlySpan<float> outputGradient) => null;
    }

    static (string, Action)[] PipelineGroup() => new (string, Action)[] {
        ("PipelineGPipeEqualsSingleProcess", PipelineGPipeEqualsSingleProcess), ("Pipeline1F1BEqualsSingleProcess", Pipeline1F1BEqualsSingleProcess),
        ("PipelineInterleavedEqualsSingleProcess", PipelineInterleavedEqualsSingleProcess),
        ("PipelineExceptionFailsEveryStage", PipelineExceptionFailsEveryStage),
        ("PipelineWrongActivationSizeFailsEveryStage", PipelineWrongActivationSizeFailsEveryStage), ("PipelineMisuseRefused", PipelineMisuseRefused) };
}
