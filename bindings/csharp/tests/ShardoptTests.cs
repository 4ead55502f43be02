// Plain-assert test runner on mono: each [Test]-like method runs; exit code = failures.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Threading;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    static readonly MlpDemo Model = new MlpDemo();

    static void Assert(bool c, string what) { if (!c) throw new Exception("assertion failed: " + what); }

    static T Throws<T>(Action a) where T : Exception
    {
        try { a(); } catch (T e) { return e; } catch (Exception e) { throw new Exception($"expected {typeof(T).Name}, got {e.GetType().Name}: {e.Message}"); }
        throw new Exception($"expected {typeof(T).Name}, nothing thrown");
    }

    static List<T> Ranks<T>(int worldSize, Func<CommunicationBackend, T> body)
    {
        string env = "cs-" + Guid.NewGuid();
        var results = new T[worldSize];
        var errors = new Exception[worldSize];
        var threads = Enumerable.Range(0, worldSize).Select(rank => new Thread(() =>
        {
            using (var b = new InMemoryCommunicationBackend(rank, worldSize, env))
            {
                try { results[rank] = body(b); }
                catch (Exception e) { errors[rank] = e; b.Abort($"rank {rank} failed"); }
            }
        })).ToList();
        threads.ForEach(t => t.Start());
        threads.ForEach(t => t.Join());
        var first = errors.FirstOrDefault(e => e != null && !(e is InvalidOperationException)) ?? errors.FirstOrDefault(e => e != null);
        if (first != null) System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(first).Throw();
        return results.ToList();
    }

    // The training settings of the tests written before they moved onto the options: BatchSize and epochs as given, the
    // samples in order, no early stopping.
    static T Plain<T>(T options, int batchSize, int epochs) where T : OptimizerOptions
    {
        options.BatchSize = batchSize; options.MaxIterations = epochs; options.ShuffleData = false; options.UseEarlyStopping = false;
        return options;
    }

    static (OptimizationResult<float>, float[]) Train(string strategy, int worldSize) => Ranks(worldSize, b =>
    {
        var adam = new AdamOptimizer(Plain(new AdamOptimizerOptions { LearningRate = 3e-3 }, 128, 3));
        var cfg = new ShardingConfiguration(b);
        ShardedOptimizer opt = strategy == "ddp" ? new DDPOptimizer(adam, cfg) : strategy == "zero2" ? (ShardedOptimizer)new ZeRO2Optimizer(adam, cfg) : new FSDPOptimizer(adam, cfg);
        using (opt)
        {
            opt.Initialize(Model.Layout(), Model.InitialParameters());
            var r = opt.Optimize(Model.Evaluate, new OptimizationInputData { NumSamples = Model.Samples });
            return (r, opt.GetParameters());
        }
    })[0];

    static ShardedOptimizer MakeAdam(string strategy, CommunicationBackend b, bool initial)
    {
        var adam = new AdamOptimizer(new AdamOptimizerOptions { LearningRate = 3e-3 });
        var cfg = new ShardingConfiguration(b);
        ShardedOptimizer opt = strategy == "ddp" ? new DDPOptimizer(adam, cfg) : strategy == "zero2" ? (ShardedOptimizer)new ZeRO2Optimizer(adam, cfg) : new FSDPOptimizer(adam, cfg);
        return opt.Initialize(Model.Layout(), initial ? Model.InitialParameters() : null);
    }

    // Steps [first, first + count) with the step protocol: each rank's slice of a fixed batch of 128.
    static void TrainSteps(ShardedOptimizer opt, int rank, int first, int count)
    {
        int per = 128 / opt.WorldSize;
        var grad = new float[Model.Layout().ElementCount];
        var samples = new long[per];
        for (int step = first; step < first + count; ++step)
        {
            int b0 = step * 128 % Model.Samples;
            for (int i = 0; i < per; ++i) samples[i] = b0 + rank * per + i;
            Array.Clear(grad, 0, grad.Length);
            Model.Evaluate(opt.GetParameters(), grad, samples);
            opt.ZeroGrad();
            int off = 0, tensors = opt.TensorCount;
            for (int t = 0; t < tensors; ++t)
            {
                var g = opt.TensorGradient(t);
                g.CopyFrom(new ReadOnlySpan<float>(grad, off, g.Length));
                off += g.Length;
                int bucket = opt.TensorBucket(t);
                if (t + 1 == tensors || opt.TensorBucket(t + 1) != bucket) opt.GradReady(bucket); // frees its staging buffer
            }
            var r = opt.Step();
            Assert(r.Applied, "applied");
            Assert(r.ReduceWaitSeconds >= 0 && r.UpdateSeconds >= 0 && r.PostUpdateSeconds >= 0, "step timings");
        }
    }

    static void SerializeDeserializeResumesBitwise()
    {
        foreach (var s in new[] { "ddp", "zero2", "fsdp" })
        {
            var res = Ranks(4, b =>
            {
                using (var opt = MakeAdam(s, b, true))
                {
                    TrainSteps(opt, b.Rank, 0, 3);
                    byte[] data = opt.Serialize();
                    Assert(data.Length > 0, "bytes");
                    TrainSteps(opt, b.Rank, 3, 3);
                    var straight = opt.GetParameters();
                    opt.Deserialize(data);
                    Assert(opt.StepCount == 3, "step count restored");
                    TrainSteps(opt, b.Rank, 3, 3);
                    return (data, straight, opt.GetParameters());
                }
            });
            foreach (var r in res)
            {
                Assert(r.Item1.SequenceEqual(res[0].Item1), s + ": same bytes on every rank");
                Assert(r.Item2.SequenceEqual(r.Item3), s + ": resumed == straight, bitwise");
                Assert(r.Item2.SequenceEqual(res[0].Item2), s + ": ranks agree");
            }
        }
    }

    static void SaveZero2LoadFsdp()
    {
        string dir = Path.Combine(Path.GetTempPath(), "shardopt-cs-ckpt-" + Guid.NewGuid());
        try
        {
            foreach (bool consolidated in new[] { false, true })
            {
                string path = Path.Combine(dir, consolidated ? "consolidated" : "sharded");
                var res = Ranks(4, b =>
                {
                    float[] expected;
                    using (var saved = MakeAdam("zero2", b, true))
                    {
                        TrainSteps(saved, b.Rank, 0, 4);
                        if (consolidated) saved.SaveModel(path, true); else saved.SaveModel(path);
                        expected = saved.GetParameters();
                    }
                    using (var fresh = MakeAdam("fsdp", b, false))
                    {
                        Assert(!fresh.GetParameters().SequenceEqual(expected), "fresh differs");
                        fresh.LoadModel(path);
                        Assert(fresh.StepCount == 4, "step count loaded");
                        return (expected, fresh.GetParameters());
                    }
                });
                foreach (var r in res) Assert(r.Item1.SequenceEqual(r.Item2), $"loaded == saved (consolidated={consolidated})");
                Assert(Directory.Exists(path), "checkpoint directory");
            }
        }
        finally { if (Directory.Exists(dir)) Directory.Delete(dir, true); }
    }

    static void CheckpointErrors()
    {
        string missing = Path.Combine(Path.GetTempPath(), "shardopt-cs-never-written-" + Guid.NewGuid());
        Ranks(4, b =>
        {
            using (var opt = MakeAdam("zero2", b, true))
            {
                TrainSteps(opt, b.Rank, 0, 2);
                var data = opt.Serialize();
                var before = opt.GetParameters();
                var io = Throws<IOException>(() => opt.LoadModel(missing));
                Assert(io.Message.StartsWith("SHARDOPT_ERR_IO: ") && io.Message.Contains("never-written"), io.Message);
                var bad = (byte[])data.Clone();
                bad[0] ^= 0xff; // wrong magic
                var c = Throws<IOException>(() => opt.Deserialize(bad));
                Assert(c.Message.StartsWith("SHARDOPT_ERR_CORRUPT: ") && c.Message.Contains("magic"), c.Message);
                var truncated = data.Take(data.Length / 2).ToArray();
                Assert(Throws<IOException>(() => opt.Deserialize(truncated)).Message.StartsWith("SHARDOPT_ERR_CORRUPT"), "truncated");
                var flipped = (byte[])data.Clone();
                flipped[data.Length / 2] ^= 1; // checksum
                Assert(Throws<IOException>(() => opt.Deserialize(flipped)).Message.StartsWith("SHARDOPT_ERR_CORRUPT"), "checksum");
                Assert(Throws<IOException>(() => opt.Deserialize(new byte[0])).Message.StartsWith("SHARDOPT_ERR_CORRUPT"), "empty");
                Throws<ArgumentNullException>(() => opt.Deserialize(null));
                Throws<ArgumentNullException>(() => opt.LoadModel(null));
                Assert(before.SequenceEqual(opt.GetParameters()), "failed loads change nothing");
                Assert(opt.StepCount == 2, "step count unchanged");
            }
            using (var other = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b)))
            {
                other.Initialize(new ParameterLayout().Add("w", 4));
                byte[] data;
                using (var opt = MakeAdam("ddp", b, true)) data = opt.Serialize();
                Assert(Throws<ArgumentException>(() => other.Deserialize(data)).Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT"), "layout mismatch");
            }
            return 0;
        });
        Assert(!Directory.Exists(missing), "a failed load creates nothing");
    }

    // d with what every Serialize makes anew blanked: the head's checksum (bytes 24-31) and its generation.
    static byte[] WithoutGeneration(byte[] d)
    {
        var c = (byte[])d.Clone();
        Array.Clear(c, 24, 8);
        int at = System.Text.Encoding.ASCII.GetString(c).IndexOf("\"generation\":\"", StringComparison.Ordinal) + 14;
        Assert(at >= 14, "a generation in the head");
        Array.Clear(c, at, 16);
        return c;
    }

    // A stream counting its writes; throws `failure` on the second when given one. Each write collects garbage: the
    // writer's delegate must stay alive while the library still calls it.
    sealed class CountingStream : MemoryStream
    {
        internal int Writes;
        readonly Exception failure;
        internal CountingStream(Exception failure = null) { this.failure = failure; }
        public override void Write(byte[] buffer, int offset, int count)
        {
            GC.Collect();
            if (++Writes == 2 && failure != null) throw failure;
            base.Write(buffer, offset, count);
        }
    }

    static void SerializeToStream()
    {
        foreach (int ws in new[] { 1, 2 })
        {
            // the bytes: Serialize's, the same on every rank
            var res = Ranks(ws, b =>
            {
                using (var opt = MakeAdam("fsdp", b, true))
                {
                    TrainSteps(opt, b.Rank, 0, 2);
                    var data = opt.Serialize();
                    var s = new CountingStream();
                    opt.Serialize(s);
                    Assert(s.Writes >= 2, "the head, then the data");
                    return (data, s.ToArray());
                }
            });
            foreach (var r in res)
            {
                Assert(r.Item2.SequenceEqual(res[0].Item2), ws + " ranks: the same bytes on every rank");
                Assert(WithoutGeneration(r.Item1).SequenceEqual(WithoutGeneration(r.Item2)), ws + " ranks: Serialize's bytes");
            }
            // to a file, then Deserialize of its bytes resumes bit for bit
            string dir = Path.Combine(Path.GetTempPath(), "shardopt-cs-stream-" + Guid.NewGuid());
            Directory.CreateDirectory(dir);
            try
            {
                var resumed = Ranks(ws, b =>
                {
                    string file = Path.Combine(dir, b.Rank + ".ckpt");
                    float[] straight;
                    using (var opt = MakeAdam("zero2", b, true))
                    {
                        TrainSteps(opt, b.Rank, 0, 3);
                        using (var f = File.Create(file)) opt.Serialize(f);
                        TrainSteps(opt, b.Rank, 3, 2);
                        straight = opt.GetParameters();
                    }
                    using (var fresh = MakeAdam("zero2", b, true))
                    {
                        fresh.Deserialize(File.ReadAllBytes(file));
                        Assert(fresh.StepCount == 3, "step count restored");
                        TrainSteps(fresh, b.Rank, 3, 2);
                        return (straight, fresh.GetParameters());
                    }
                });
                foreach (var r in resumed) Assert(r.Item1.SequenceEqual(r.Item2), ws + " ranks: resumed == straight, bitwise");
            }
            finally { Directory.Delete(dir, true); }
        }
    }

    static void SerializeToStreamFailure()
    {
        Ranks(2, b =>
        {
            using (var opt = MakeAdam("ddp", b, true))
            {
                TrainSteps(opt, b.Rank, 0, 2);
                // rank 0's stream throws on its second write: it gets that exception back, rank 1 an IOException naming it
                foreach (var failure in new Exception[] { new IOException("disk full"), new ObjectDisposedException("stream") })
                {
                    var s = new CountingStream(b.Rank == 0 ? failure : null);
                    Exception got = null;
                    try { opt.Serialize(s); } catch (Exception e) { got = e; }
                    if (b.Rank == 0) Assert(ReferenceEquals(got, failure) && s.Writes == 2, $"rank 0: its own exception, no write after it ({got})");
                    else Assert(got is IOException && got.Message.StartsWith("SHARDOPT_ERR_IO: ") &&
                                got.Message.Contains($"writer returned 1 on rank 0: {failure.GetType().FullName}: {failure.Message}"), $"rank 1: {got}");
                }
                // null on rank 1: rank 0 alone gets the bytes; both go on
                var only = new CountingStream();
                opt.Serialize(b.Rank == 0 ? only : null);
                var again = opt.Serialize();
                if (b.Rank == 0) Assert(WithoutGeneration(again).SequenceEqual(WithoutGeneration(only.ToArray())), "rank 0 alone");
                return 0;
            }
        });
    }

    static void FourRanksMatchSingleProcess()
    {
        var (refR, refP) = Train("ddp", 1);
        Assert(refR.FitnessHistory[2] < 0.8 * refR.FitnessHistory[0], "loss decreases");
        foreach (var s in new[] { "ddp", "zero2", "fsdp" })
        {
            var (r, p) = Train(s, 4);
            Assert(r.Iterations == refR.Iterations, s + " iterations");
            for (int i = 0; i < r.FitnessHistory.Length; ++i) Assert(Math.Abs(r.FitnessHistory[i] - refR.FitnessHistory[i]) < 1e-5, s + " loss");
            for (int i = 0; i < p.Length; ++i) Assert(Math.Abs(p[i] - refP[i]) < 1e-5, $"{s} parameter {i}");
        }
    }

    static void StepApiZeroCopy()
    {
        var res = Ranks(4, b =>
        {
            using (var opt = new DDPOptimizer(new StochasticGradientDescentOptimizer(), new ShardingConfiguration(b, 0.5)))
            {
                var lay = new ParameterLayout().Add("w", 10);
                var mine = new float[opt.PaddedCountFor(lay)];
                opt.Initialize(lay, Enumerable.Repeat(1f, 10).ToArray(), mine);
                opt.ZeroGrad();
                opt.BucketGradient(0).Fill(b.Rank + 1f);
                var r = opt.Step();
            Assert(r.Applied, "applied");
            Assert(r.ReduceWaitSeconds >= 0 && r.UpdateSeconds >= 0 && r.PostUpdateSeconds >= 0, "step timings");
                Assert(Math.Abs(mine[3] - (1 - 0.5f * 2.5f)) < 1e-6, "updated in the caller's pinned array");
                Assert(opt.Parameters[3] == mine[3], "Parameters is the same memory");
                return opt.GetParameters()[0];
            }
        });
        Assert(res.All(v => Math.Abs(v + 0.25f) < 1e-6), "all ranks equal");
    }

    static void ConfigurationChangesBehaviour()
    {
        var res = Ranks(2, b =>
        {
            var cfgs = new[] { ShardingConfiguration.CreateDefault(b), ShardingConfiguration.CreateForHighBandwidth(b), ShardingConfiguration.CreateForLowBandwidth(b) };
            return cfgs.Select(c =>
            {
                var lay = new ParameterLayout();
                for (int t = 0; t < 8; ++t) lay.Add("t" + t, 300);
                using (var o = new DDPOptimizer(new AdamOptimizer(), c)) { o.Initialize(lay); return o.BucketCount; }
            }).ToArray();
        });
        Assert(res[0][1] > res[0][0] && res[0][0] > res[0][2], "bucket counts high > default > low");
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-cfg"))
        {
            var c = new ShardingConfiguration(b);
            Assert(!c.EnableGradientCompression, "AiDotNet's default: off");
            c.EnableGradientCompression = true;                    // compression is real now: no refusal
            Assert(c.GradientCompression == GradientCompression.Int8, "int8 by default");
            c.EnableGradientCompression = false;
            c.AutoSyncGradients = false;
            var refused = Throws<ArgumentException>(() => new FSDPOptimizer(new AdamOptimizer(), c)); // the library's check, at once
            Assert(refused.Message.Contains("auto_sync_gradients") && refused.Message.Contains("fsdp"), refused.Message);
            Throws<ArgumentException>(() => new ShardingConfiguration(b, -1));
        }
    }

    // ---- gradient compression ----

    // The demo MLP with SGD momentum 0.9, lr 0.05 (as the C++ accuracy test), 80 steps on 4 in-memory ranks:
    // (full-data loss, rank 0's bytes moved by Optimize, rank 0's compression bytes).
    static (double loss, long bytes, long compressionBytes) TrainCompressed(Func<Optimizer, ShardingConfiguration, ShardedOptimizer> make)
    {
        var res = Ranks(4, b =>
        {
            var momentum = new MomentumOptimizer(Plain(new MomentumOptimizerOptions { LearningRate = 0.05, Momentum = 0.9 }, 64, 10));
            using (var opt = make(momentum, new ShardingConfiguration(b)))
            {
                opt.Initialize(Model.Layout(), Model.InitialParameters());
                long before = opt.BytesSent;
                opt.Optimize(Model.Evaluate, new OptimizationInputData { NumSamples = Model.Samples });
                long sent = opt.BytesSent - before;
                return (FullLoss(opt.GetParameters()), sent, opt.GetMemoryStats().CompressionBytes);
            }
        });
        Assert(res.All(r => Math.Abs(r.Item1 - res[0].Item1) <= 1e-6 * res[0].Item1), "replicas agree");
        return res[0];
    }

    static double FullLoss(float[] parameters)
    {
        var all = new long[Model.Samples];
        for (int i = 0; i < all.Length; ++i) all[i] = i;
        return Model.Evaluate(parameters, new float[parameters.Length], all);
    }

    static void CompressionConfiguration()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-compression"))
        {
            var c = new ShardingConfiguration(b);
            Assert(!c.EnableGradientCompression && c.GradientCompression == GradientCompression.Int8 && c.CompressionRatio == 0.1
                   && c.ErrorFeedback && c.PowerSgdRank == 4, "defaults");
            c.EnableGradientCompression = true;
            c.GradientCompression = GradientCompression.TopK;
            Assert(c.GradientCompression == GradientCompression.TopK, "method set");
            var low = ShardingConfiguration.CreateForLowBandwidth(b);
            Assert(low.EnableGradientCompression && low.GradientCompression == GradientCompression.Int8 && low.MinimumParameterGroupSize == 4096,
                   "CreateForLowBandwidth turns int8 compression on");
            Assert(!ShardingConfiguration.CreateForHighBandwidth(b).EnableGradientCompression, "high bandwidth: off");
            using (var bd = new InMemoryCommunicationBackend<double>(0, 1, "cs-compression-d"))
                Assert(ShardingConfiguration<double>.CreateForLowBandwidth(bd).EnableGradientCompression, "generic CreateForLowBandwidth too");
        }
    }

    static void CompressedTrainingReachesUncompressedLoss()
    {
        var baseline = TrainCompressed((w, c) => new DDPOptimizer(w, c));
        var quant = TrainCompressed((w, c) => new GradientCompressionOptimizer(w, c));
        var sparse = TrainCompressed((w, c) => new GradientCompressionOptimizer(w, c, compressionRatio: 0.1, useSparsification: true));
        var viaConfig = TrainCompressed((w, c) => { c.EnableGradientCompression = true; return new DDPOptimizer(w, c); });
        // 80 steps take the demo close to zero loss; compressed training must get there too
        double initial = FullLoss(Model.InitialParameters());
        foreach (var r in new[] { baseline, quant, sparse }) Assert(r.loss < 0.01 * initial, $"trained: {r.loss} from {initial}");
        Console.WriteLine($"  compression: loss {baseline.loss:G3}, int8 {100 * (quant.loss / baseline.loss - 1):+0.000;-0.000}%, " +
                          $"top-k {100 * (sparse.loss / baseline.loss - 1):+0.000;-0.000}%; bytes {baseline.bytes}, int8 " +
                          $"{(double)baseline.bytes / quant.bytes:F2}x fewer, top-k {(double)baseline.bytes / sparse.bytes:F2}x fewer");
        Assert(quant.loss <= baseline.loss * 1.02, $"int8 loss {quant.loss} vs {baseline.loss}");
        Assert(sparse.loss <= baseline.loss * 1.05, $"top-k loss {sparse.loss} vs {baseline.loss}");
        Assert(quant.bytes * 3 <= baseline.bytes, $"int8 bytes {quant.bytes} vs {baseline.bytes}");
        Assert(sparse.bytes < baseline.bytes, $"top-k bytes {sparse.bytes} vs {baseline.bytes}");
        Assert(viaConfig.bytes == quant.bytes && Math.Abs(viaConfig.loss - quant.loss) < 1e-9, "int8 either way");
        Assert(baseline.compressionBytes == 0 && quant.compressionBytes > 0, "compression bytes in the memory stats");
    }

    static void GradientCompressionOptimizerAndPowerSgd()
    {
        var res = Ranks(2, b =>
        {
            var sgd = new StochasticGradientDescentOptimizer();
            var c = new ShardingConfiguration(b, 0.1);
            Assert(new GradientCompressionOptimizer(sgd, c, useSparsification: true).Compression == GradientCompression.TopK, "sparsification wins");
            Assert(new GradientCompressionOptimizer(sgd, c, useQuantization: false).Compression == GradientCompression.None, "neither");
            IShardedOptimizer i = new GradientCompressionOptimizer<float>(sgd, c);
            Assert(i.WrappedOptimizer == sgd, "IShardedOptimizer");
            // PowerSGD approximates tensors declared with AddMatrix; a flat tensor of the same size goes uncompressed
            var p = new ShardingConfiguration(b, 0.1) { EnableGradientCompression = true, GradientCompression = GradientCompression.PowerSGD, PowerSgdRank = 2 };
            var sent = new long[2];
            var layouts = new[] { new ParameterLayout().AddMatrix("w", 64, 64), new ParameterLayout().Add("w", 64 * 64) };
            var rng = new Random(b.Rank);
            for (int k = 0; k < 2; ++k)
                using (var o = new DDPOptimizer(sgd, p))
                {
                    o.Initialize(layouts[k]);
                    for (int step = 0; step < 4; ++step)
                    {
                        o.ZeroGrad();
                        var g = o.BucketGradient(0);
                        for (int e = 0; e < 64 * 64; ++e) g[e] = (float)(rng.NextDouble() * 2 - 1);
                        long n = o.Step().BytesSent;
                        if (step > 0) sent[k] += n; // not the first (creation's broadcast)
                    }
                }
            return sent;
        });
        Assert(res[0][0] * 4 < res[0][1], $"PowerSGD {res[0][0]} vs flat {res[0][1]}");
    }

    static void InvalidCompressionSettingsThrow()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-compression-errors"))
        {
            var c = new ShardingConfiguration(b);
            foreach (double bad in new[] { 0, -0.1, 1.5, double.NaN })
            {
                Throws<ArgumentException>(() => c.CompressionRatio = bad);
                Throws<ArgumentException>(() => new GradientCompressionOptimizer(new AdamOptimizer(), c, bad));
                Throws<ArgumentException>(() => new GradientCompressionOptimizer<float>(new AdamOptimizer(), c, bad));
            }
            Throws<ArgumentException>(() => c.PowerSgdRank = 0);
            Throws<ArgumentException>(() => c.GradientCompression = (GradientCompression)42);
            Throws<ArgumentOutOfRangeException>(() => new ParameterLayout().AddMatrix("w", 0, 4));
            Assert(c.CompressionRatio == 0.1 && c.GradientCompression == GradientCompression.Int8, "unchanged by the failed sets");
        }
    }

    // The options are the library's presets (AiDotNet's defaults since issue 32: RMSprop's decay 0.9, SGD's 0.01) and its
    // training defaults; the C# layer states none of them.
    static void DefaultsMatchLibrary()
    {
        Assert(new AdamOptimizerOptions().LearningRate == 1e-3 && new AdamOptimizerOptions().InitialLearningRate == 1e-3, "adam lr");
        Assert(Math.Abs(new AdamWOptimizerOptions().WeightDecay - 0.01) < 1e-12, "adamw wd");
        Assert(new MomentumOptimizerOptions().Momentum == 0.9, "momentum");
        Assert(Math.Abs(new RootMeanSquarePropagationOptimizerOptions().Decay - 0.9) < 1e-12, "rmsprop decay");
        Assert(new StochasticGradientDescentOptimizerOptions().InitialLearningRate == 0.01, "sgd lr");
        var o = new AdamOptimizerOptions();
        Assert(o.MaxIterations == 100 && o.BatchSize == 32 && o.ShuffleData && o.UseEarlyStopping && o.EarlyStoppingPatience == 10 && o.Tolerance == 1e-6 &&
               o.MaxSteps == 0 && o.RandomSeed == 0 && o.LearningRateSchedule == null, "training defaults");
        var e = Throws<ArgumentException>(() => o.MaxIterations = 0);
        Assert(e.Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT") && e.Message.Contains("max_epochs") && o.MaxIterations == 100, e.Message);
        Assert(Throws<ArgumentException>(() => o.Beta1 = 1.5).Message.Contains("beta") && o.Beta1 == 0.9, "beta1 checked by the library");
        Assert(Throws<ArgumentException>(() => LearningRateSchedule.Warmup(0)).Message.Contains("warmup"), "a schedule checked at once");
    }

    static void ErrorsMapToExceptions()
    {
        var e = Throws<ArgumentException>(() => new InMemoryCommunicationBackend(5, 4, "cs-bad"));
        Assert(e.Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT: "), e.Message);
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-err"))
        {
            using (var o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b)))
            {
                o.Initialize(new ParameterLayout().Add("w", 4));
                Throws<ArgumentException>(() => o.SetParameters(new float[3]));
                Throws<ArgumentException>(() => o.SetLearningRate(-1));
            }
            using (var f = new FSDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b)))
            {
                Throws<NotSupportedException>(() => f.Initialize(new ParameterLayout().Add("w", 4), null, new float[4]));
                f.Initialize(new ParameterLayout().Add("w", 4));
                var s = Throws<InvalidOperationException>(() => { var _ = f.Parameters.Length; });
                Assert(s.Message.Contains("SHARDOPT_ERR_INVALID_STATE"), s.Message);
                var io = Throws<IOException>(() => f.LoadModel(Path.Combine(Path.GetTempPath(), "shardopt-cs-" + Guid.NewGuid())));
                Assert(io.Message.StartsWith("SHARDOPT_ERR_IO: "), io.Message);
                var c = Throws<IOException>(() => f.Deserialize(System.Text.Encoding.ASCII.GetBytes("not a checkpoint")));
                Assert(c.Message.StartsWith("SHARDOPT_ERR_CORRUPT: "), c.Message);
            }
        }
        // NCCL is in the C ABI now: without a usable CUDA device (or NCCL) it is NotSupportedException naming the backend
        try { new NcclCommunicationBackend().Dispose(); }
        catch (NotSupportedException ex) { Assert(ex.Message.StartsWith("SHARDOPT_ERR_UNSUPPORTED") && ex.Message.Contains("nccl"), ex.Message); }
        catch (ArgumentException ex) { Assert(ex.Message.Contains("world size"), ex.Message); } // a GPU machine without a launcher
        // rank 1 stays (a rank that goes fails the others at once with PEER_LOST: PolicyTests.cs) while rank 0 times out
        var left = new ManualResetEventSlim();
        var t = Throws<TimeoutException>(() => Ranks<int>(2, b => { b.SetTimeout(200); if (b.Rank == 0) try { b.Barrier(); } finally { left.Set(); } else left.Wait(); return 0; }));
        Assert(t.Message.Contains("SHARDOPT_ERR_TIMEOUT") && ((IShardoptException)t).StatusCode == 3 && ((IShardoptException)t).Rank == 0, t.Message);
        var boom = Throws<FormatException>(() => Ranks<int>(2, b =>
        {
            using (var o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b)))
            {
                o.Initialize(new ParameterLayout().Add("w", 4));
                o.Optimize((p, g, s, d) => { if (b.Rank == 1) throw new FormatException("model failed on rank 1"); return 1.0; },
                           new OptimizationInputData { NumSamples = 8 });
            }
            return 0;
        }));
        Assert(boom.Message == "model failed on rank 1", boom.Message);
    }

    static void NullArguments()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-null"))
        {
            var c = new ShardingConfiguration(b);
            Throws<ArgumentNullException>(() => new DDPOptimizer(null, c));
            Throws<ArgumentNullException>(() => new ZeRO1Optimizer(new AdamOptimizer(), null));
            Throws<ArgumentNullException>(() => new ZeRO2Optimizer(null, c));
            Throws<ArgumentNullException>(() => new FSDPOptimizer(null, c));
            Throws<ArgumentNullException>(() => new ZeRO3Optimizer(null, c));
            Throws<ArgumentNullException>(() => new HybridShardedOptimizer(null, c));
            Throws<ArgumentNullException>(() => new LocalSGDOptimizer(null, c));
            Throws<ArgumentNullException>(() => new ShardingConfiguration(null));
            Throws<NullReferenceException>(() => { string s = null; var _ = s.Length; }); // runtime still owns SIGSEGV
        }
    }

    static long RssKib() => long.Parse(File.ReadAllLines("/proc/self/status").First(l => l.StartsWith("VmRSS:")).Split((char[])null, StringSplitOptions.RemoveEmptyEntries)[1]);

    static void TenThousandCycles()
    {
        var lay = new ParameterLayout().Add("w", 256).Add("b", 16);
        Action cycle = () =>
        {
            using (var b = new InMemoryCommunicationBackend(0, 1, "cs-cycles"))
            using (var o = new ZeRO2Optimizer(new AdamOptimizer(), new ShardingConfiguration(b)))
            {
                o.Initialize(lay);
                o.ZeroGrad();
                o.Step();
            }
        };
        for (int i = 0; i < 2000; ++i) cycle();
        GC.Collect(); GC.WaitForPendingFinalizers();
        long before = RssKib();
        for (int i = 0; i < 10000; ++i) cycle();
        GC.Collect(); GC.WaitForPendingFinalizers();
        long grown = RssKib() - before;
        Assert(grown < 16384, $"RSS grew by {grown} KiB over 10000 cycles");
    }

    static void TwoUcxProcesses()
    {
        string run = Environment.GetEnvironmentVariable("SHARDOPT_RUN"), mono = Environment.GetEnvironmentVariable("MONO");
        if (run == null || mono == null) { Console.WriteLine("  (skipped: SHARDOPT_RUN/MONO unset)"); return; }
        var exe = typeof(ShardoptTests).Assembly.Location;
        var psi = new ProcessStartInfo("python3", $"{run} -n 2 --timeout 120 -- {mono} {exe} --ucx-worker") { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
        var p = Process.Start(psi);
        string output = p.StandardOutput.ReadToEnd() + p.StandardError.ReadToEnd();
        p.WaitForExit();
        Assert(p.ExitCode == 0 && output.Split(new[] { "ucx ok" }, StringSplitOptions.None).Length == 3, output);
    }

    static int UcxWorker()
    {
        using (var b = new UcxCommunicationBackend())
        {
            OptimizationResult<float> r;
            float[] p;
            using (var opt = new ZeRO2Optimizer(new AdamOptimizer(Plain(new AdamOptimizerOptions(), 128, 3)), new ShardingConfiguration(b, 3e-3)))
            {
                opt.Initialize(Model.Layout(), Model.InitialParameters());
                r = opt.Optimize(Model.Evaluate, new OptimizationInputData { NumSamples = Model.Samples });
                p = opt.GetParameters();
            }
            float[] lo = (float[])p.Clone(), hi = (float[])p.Clone();
            b.AllReduce(lo, ReductionOperation.Min);
            b.AllReduce(hi, ReductionOperation.Max);
            Assert(lo.SequenceEqual(hi), "ranks agree");
            var h = r.FitnessHistory;
            Assert(h[h.Length - 1] < h[0], "loss decreases");
            Console.WriteLine($"ucx ok rank {b.Rank} loss {h[0]:F4} -> {h[h.Length - 1]:F4}");
        }
        return 0;
    }

    static int Main(string[] args)
    {
        if (args.Length > 0 && args[0] == "--ucx-worker") return UcxWorker();
        if (args.Length > 0 && args[0] == "--worldsize-worker") return WorldSizeWorker();
        var tests = args.Length > 1 && args[0] == "--group" ? Group(args[1]) : new (string, Action)[] {
            ("FourRanksMatchSingleProcess", FourRanksMatchSingleProcess), ("StepApiZeroCopy", StepApiZeroCopy),
            ("ConfigurationChangesBehaviour", ConfigurationChangesBehaviour), ("DefaultsMatchLibrary", DefaultsMatchLibrary),
            ("CompressionConfiguration", CompressionConfiguration), ("CompressedTrainingReachesUncompressedLoss", CompressedTrainingReachesUncompressedLoss),
            ("GradientCompressionOptimizerAndPowerSgd", GradientCompressionOptimizerAndPowerSgd),
            ("InvalidCompressionSettingsThrow", InvalidCompressionSettingsThrow),
            ("ZeROOffloadConfiguration", ZeROOffloadConfiguration), ("OffloadFlagsChangeNothingInHostMemory", OffloadFlagsChangeNothingInHostMemory),
            ("ErrorsMapToExceptions", ErrorsMapToExceptions), ("NullArguments", NullArguments),
            ("SerializeDeserializeResumesBitwise", SerializeDeserializeResumesBitwise), ("SaveZero2LoadFsdp", SaveZero2LoadFsdp),
            ("CheckpointErrors", CheckpointErrors), ("SerializeToStream", SerializeToStream),
            ("SerializeToStreamFailure", SerializeToStreamFailure), ("TenThousandCycles", TenThousandCycles), ("TwoUcxProcesses", TwoUcxProcesses) };
        int failed = 0;
        foreach (var entry in tests)
        {
            var name = entry.Item1;
            var test = entry.Item2;
            var sw = Stopwatch.StartNew();
            try { test(); Console.WriteLine($"PASS {name} ({sw.ElapsedMilliseconds} ms)"); }
            catch (Exception e) { ++failed; Console.WriteLine($"FAIL {name}: {e}"); }
        }
        Console.WriteLine($"{tests.Length - failed} passed, {failed} failed");
        return failed;
    }
}
