// Issue 19: user mistakes raise exceptions (never crash or corrupt), ranks that disagree fail on every rank,
// double everywhere, the model path and the rest of ICommunicationBackend. Run with --group safety|agreement|api.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    // Runs body on worldSize rank threads (no abort on failure: the library must fail every rank itself);
    // returns each rank's result or exception.
    static Tuple<T[], Exception[]> RanksAll<T>(int worldSize, Func<CommunicationBackend<double>, T> body)
    {
        string env = "cs19-" + Guid.NewGuid();
        var results = new T[worldSize];
        var errors = new Exception[worldSize];
        var threads = Enumerable.Range(0, worldSize).Select(rank => new Thread(() =>
        {
            try
            {
                using (var b = new InMemoryCommunicationBackend<double>(rank, worldSize, env))
                {
                    b.SetTimeout(20000);
                    results[rank] = body(b);
                }
            }
            catch (Exception e) { errors[rank] = e; }
        })).ToList();
        threads.ForEach(t => t.Start());
        threads.ForEach(t => t.Join());
        return Tuple.Create(results, errors);
    }

    static void AllFail<E>(Exception[] errors, params string[] texts) where E : Exception
    {
        for (int r = 0; r < errors.Length; ++r)
        {
            Assert(errors[r] is E, $"rank {r}: expected {typeof(E).Name}, got {errors[r]?.GetType().Name ?? "no exception"}: {errors[r]?.Message}");
            foreach (var t in texts) Assert(errors[r].Message.Contains(t), $"rank {r}: '{errors[r].Message}' lacks '{t}'");
        }
    }

    static ParameterLayout Nine() => new ParameterLayout().Add("weight", 8).Add("bias", 1);

    // ---------------------------------------------------------------- part 2: mistakes never crash
    static void ShortArraysRejected()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs19-short"))
        using (var o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b)))
        {
            var e = Throws<ArgumentException>(() => o.Initialize(Nine(), new float[3]));
            Assert(e.Message.Contains("initial has 3 elements") && e.Message.Contains("9"), e.Message);
            Assert(!o.IsInitialized, "not initialized by a failed Initialize");
            var ext = Throws<ArgumentException>(() => o.Initialize(Nine(), null, new float[3])); // the library checks the length
            Assert(ext.Message.Contains("param_count is 3 but the layout needs 9"), ext.Message);
            o.Initialize(Nine(), new float[9]);
            Assert(Throws<ArgumentException>(() => o.SetParameters(new float[3])).Message.Contains("count is 3 but the model has 9"), "set short");
            Assert(Throws<ArgumentException>(() => o.SetParameters(new float[12])).Message.Contains("count is 12 but the model has 9"), "set long");
            Assert(Throws<ArgumentException>(() => o.GetParameters(new float[3])).Message.Contains("count is 3 but the model has 9"), "get short");
            var g = o.TensorGradient(0);
            Assert(Throws<ArgumentException>(() => g.CopyFrom(new float[3])).Message.Contains("the source has 3 elements"), "view copy");
            Throws<IndexOutOfRangeException>(() => { var _ = g[8]; });
            Throws<IndexOutOfRangeException>(() => g[-1] = 1);
        }
    }

    static void ElementTypesChecked()
    {
        var nse = Throws<NotSupportedException>(() => new InMemoryCommunicationBackend<int>(0, 1, "cs19-int"));
        Assert(nse.Message.Contains("System.Int32") && nse.Message.Contains("float or double"), nse.Message);
        using (var b = new InMemoryCommunicationBackend<double>(0, 1, "cs19-types"))
        {
            Assert(Throws<NotSupportedException>(() => new FSDPOptimizer<decimal>(new AdamOptimizer(), new ShardingConfiguration(b))).Message.Contains("System.Decimal"), "decimal");
            using (var o = new DDPOptimizer<double>(new AdamOptimizer(), new ShardingConfiguration<double>(b)))
            {
                ShardedOptimizer untyped = o;
                var e = Throws<ArgumentException>(() => untyped.Initialize(Nine(), new float[9]));
                Assert(e.Message.Contains("elements are double, got Single"), e.Message);
                o.Initialize(Nine(), Enumerable.Range(0, 9).Select(i => i + 0.1).ToArray());
                Assert(o.GetParameters()[3] == 3.1, "double round trip (no reinterpretation)");
                Assert(Throws<ArgumentException>(() => untyped.GetParameters()).Message.Contains("elements are double"), "float read of a double optimizer");
                Assert(Throws<ArgumentException>(() => { var _ = untyped.Parameters; }).Message.Contains("got Single"), "float view");
                Assert(o.Parameters[3] == 3.1, "double view");
            }
        }
    }

    static void ViewsAfterDisposeRaise()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs19-views"))
        {
            NativeView<float> parameters, grad;
            var o = new DDPOptimizer(new StochasticGradientDescentOptimizer(), new ShardingConfiguration(b, 0.5));
            o.Initialize(Nine(), new float[9]);
            parameters = o.Parameters;
            o.ZeroGrad();
            grad = o.BucketGradient(0);
            grad.Fill(1f);
            o.Step();
            Assert(parameters[0] == -0.5f, "parameters view live across steps");
            var stale = Throws<ObjectDisposedException>(() => grad.Fill(2f));
            Assert(stale.Message.Contains("expired"), stale.Message);
            o.Dispose();
            var d = Throws<ObjectDisposedException>(() => { var _ = parameters[0]; });
            Assert(d.Message.Contains("disposed"), d.Message);
            Throws<ObjectDisposedException>(() => parameters[0] = 1f);
            Throws<ObjectDisposedException>(() => parameters.CopyFrom(new float[parameters.Length]));
            Throws<ObjectDisposedException>(() => parameters.ToArray());
            Assert(!parameters.IsValid, "IsValid false");
            Throws<ObjectDisposedException>(() => o.GetParameters());
            Throws<ObjectDisposedException>(() => o.Step());
            o.Dispose(); // twice is fine
        }
        using (var b = new InMemoryCommunicationBackend<double>(0, 1, "cs19-views-d"))
        {
            var o = new FSDPOptimizer<double>(new AdamOptimizer(), new ShardingConfiguration<double>(b));
            o.Initialize(Nine());
            var unit = o.Gather(0);
            Assert(unit.Length == 9, "gathered unit");
            o.Release(0);
            Throws<ObjectDisposedException>(() => { var _ = unit[0]; });
            var g = o.TensorGradient(1);
            o.Dispose();
            Throws<ObjectDisposedException>(() => g[0] = 1.0);
        }
        var backend = new InMemoryCommunicationBackend<double>(0, 1, "cs19-backend");
        backend.Shutdown();
        Throws<ObjectDisposedException>(() => backend.Barrier());
        Throws<ObjectDisposedException>(() => backend.AllReduce(new double[2], ReductionOperation.Sum));
        Throws<ObjectDisposedException>(() => backend.Initialize());
    }

    static void BadCountsRejected()
    {
        var e = Throws<ArgumentOutOfRangeException>(() => new ParameterLayout().Add("w", -5));
        Assert(e.Message.Contains("'w' must have at least 1 element (got -5)"), e.Message);
        Throws<ArgumentOutOfRangeException>(() => new ParameterLayout().Add("w", 0));
        Throws<ArgumentNullException>(() => new ParameterLayout().Add(null, 3));
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs19-empty"))
        using (var o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b)))
        {
            Assert(Throws<ArgumentException>(() => o.Initialize(new ParameterLayout())).Message.Contains("the parameter set has no tensors"), "empty layout");
            Assert(Throws<InvalidOperationException>(() => o.Step()).Message.Contains("not initialized"), "step before init");
        }
        using (var b = new InMemoryCommunicationBackend<float>(0, 1, "cs19-recv"))
            Throws<ArgumentOutOfRangeException>(() => b.Receive(0, -1));
    }

    // ---------------------------------------------------------------- part 3: ranks that disagree
    static void LayoutMismatchFailsEveryRank()
    {
        // same padded size (9 elements) but different tensors on rank 2
        var tup1_ = RanksAll(4, b =>
        {
            var lay = b.Rank == 2 ? new ParameterLayout().Add("weight", 8).Add("w2", 1) : Nine();
            using (var o = new FSDPOptimizer<double>(new AdamOptimizer(), new ShardingConfiguration<double>(b))) o.Initialize(lay);
            return 0;
        }); var errors = tup1_.Item2;
        AllFail<InvalidOperationException>(errors, "SHARDOPT_ERR_MISMATCH", "ranks disagree on the parameter layout at tensor 1 (", "its name");
        var tup2_ = RanksAll(4, b =>
        {
            var lay = b.Rank == 1 ? new ParameterLayout().Add("weight", 5).Add("bias", 4) : new ParameterLayout().Add("weight", 4).Add("bias", 5);
            using (var o = new DDPOptimizer<double>(new AdamOptimizer(), new ShardingConfiguration<double>(b))) o.Initialize(lay);
            return 0;
        }); var counts = tup2_.Item2;
        AllFail<InvalidOperationException>(counts, "ranks disagree on the parameter layout");
    }

    static void OptionsMismatchFailsEveryRank()
    {
        var tup3_ = RanksAll(2, b =>
        {
            var cfg = new ShardingConfiguration<double>(b) { GradientAccumulationSteps = b.Rank == 1 ? 2 : 1 };
            using (var o = new ZeRO2Optimizer<double>(new AdamOptimizer(), cfg)) o.Initialize(Nine());
            return 0;
        }); var errors = tup3_.Item2;
        AllFail<InvalidOperationException>(errors, "gradient_accumulation_steps");
    }

    static void InitialParametersBroadcast()
    {
        foreach (bool broadcast in new[] { true, false })
        {
            var tup4_ = RanksAll(4, b =>
            {
                var cfg = new ShardingConfiguration<double>(b) { BroadcastInitialParameters = broadcast };
                using (var o = new DDPOptimizer<double>(new AdamOptimizer(), cfg))
                {
                    o.Initialize(Nine(), Enumerable.Repeat(b.Rank + 1.0, 9).ToArray());
                    return o.GetParameters();
                }
            }); var res = tup4_.Item1; var errors = tup4_.Item2;
            Assert(errors.All(e => e == null), string.Join("; ", errors.Where(e => e != null)));
            if (broadcast) Assert(res.All(p => p.All(v => v == 1.0)), "every rank starts from rank 0's parameters");
            else Assert(Enumerable.Range(0, 4).All(r => res[r].All(v => v == r + 1.0)), "each rank keeps its own");
        }
    }

    static void ModelExceptionNamesRankEverywhere()
    {
        var tup5_ = RanksAll(4, b =>
        {
            using (var o = new DDPOptimizer<double>(new AdamOptimizer(new AdamOptimizerOptions { BatchSize = 8, MaxIterations = 2 }), new ShardingConfiguration<double>(b)))
            {
                o.Initialize(Nine());
                o.Optimize((p, g, s, d) => { if (b.Rank == 2) throw new FormatException("bad batch on two"); return 1.0; }, new OptimizationInputData { NumSamples = 16 });
            }
            return 0;
        }); var errors = tup5_.Item2;
        Assert(errors[2] is FormatException && errors[2].Message == "bad batch on two", $"rank 2 rethrows its own: {errors[2]}");
        foreach (int r in new[] { 0, 1, 3 })
        {
            Assert(errors[r] is InvalidOperationException, $"rank {r}: {errors[r]}");
            Assert(errors[r].Message.Contains("on rank 2") && errors[r].Message.Contains("System.FormatException: bad batch on two"), errors[r].Message);
        }
    }

    // The library's message, naming the epoch and step the NaN was first met in (issue 32: C# said "epoch 1").
    static void NanLossReported()
    {
        var tup6_ = RanksAll(2, b =>
        {
            using (var o = new ZeRO2Optimizer<double>(new AdamOptimizer(new AdamOptimizerOptions { BatchSize = 8, MaxIterations = 4 }), new ShardingConfiguration<double>(b)))
            {
                o.Initialize(Nine());
                int calls = 0; // 16 samples in batches of 8: two steps an epoch; rank 1's fifth call is epoch 3's first step
                o.Optimize((p, g, s, d) => b.Rank == 1 && ++calls >= 5 ? double.NaN : 1.0, new OptimizationInputData { NumSamples = 16 });
            }
            return 0;
        }); var errors = tup6_.Item2;
        AllFail<InvalidOperationException>(errors, "SHARDOPT_ERR_INVALID_STATE", "the training loss is NaN at epoch 3, step 5");
    }

    static void UcxWithoutEnvironmentRaises()
    {
        foreach (var v in new[] { "SHARDOPT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS" })
            if (Environment.GetEnvironmentVariable(v) != null) { Console.WriteLine($"  (skipped: {v} is set)"); return; }
        var e = Throws<ArgumentException>(() => new UcxCommunicationBackend<double>());
        Assert(e.Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT") && e.Message.Contains("found no world size in the environment"), e.Message);
    }

    static void UcxWorldSizeDisagreement()
    {
        string run = Environment.GetEnvironmentVariable("SHARDOPT_RUN"), mono = Environment.GetEnvironmentVariable("MONO");
        if (run == null || mono == null) { Console.WriteLine("  (skipped: SHARDOPT_RUN/MONO unset)"); return; }
        var exe = typeof(ShardoptTests).Assembly.Location;
        var psi = new ProcessStartInfo("python3", $"{run} -n 2 --timeout 60 -- {mono} {exe} --worldsize-worker") { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
        var p = Process.Start(psi);
        string output = p.StandardOutput.ReadToEnd() + p.StandardError.ReadToEnd();
        p.WaitForExit();
        Assert(output.Split(new[] { "worldsize ok" }, StringSplitOptions.None).Length == 3, output);
    }

    static int WorldSizeWorker()
    {
        string rank = Environment.GetEnvironmentVariable("SHARDOPT_RANK");
        if (rank == "1") Environment.SetEnvironmentVariable("SHARDOPT_WORLD_SIZE", "3");
        try
        {
            using (var b = new UcxCommunicationBackend<double>()) { Console.WriteLine($"rank {rank}: no error"); return 1; }
        }
        catch (Exception e)
        {
            bool ok = e is ArgumentException && e.Message.Contains("world size disagrees across ranks") && e.Message.Contains("world size 3") && e.Message.Contains("2");
            Console.WriteLine($"rank {rank}: {e.GetType().Name}: {e.Message}{(ok ? " -- worldsize ok" : "")}");
            return ok ? 0 : 1;
        }
    }

    // ---------------------------------------------------------------- API: double, model, backend, LR
    sealed class Linear : IGradientModel<double, double[][], double[]>
    {
        double[] p = new double[9];
        public ParameterLayout GetParameterLayout() => Nine();
        public double[] GetParameters() => (double[])p.Clone();
        public void SetParameters(double[] v) => p = (double[])v.Clone();
        public int SampleCount(double[][] x) => x.Length;
        public double ComputeLossAndGradient(ReadOnlySpan<double> w, Span<double> g, double[][] x, double[] y, ReadOnlySpan<long> samples)
        {
            double loss = 0;
            foreach (long s in samples)
            {
                var xi = x[s];
                double err = w[8] - y[s];
                for (int j = 0; j < 8; ++j) err += w[j] * xi[j];
                loss += 0.5 * err * err;
                for (int j = 0; j < 8; ++j) g[j] += err * xi[j] / samples.Length;
                g[8] += err / samples.Length;
            }
            return loss / samples.Length;
        }
    }

    static Tuple<double[][], double[]> LinearData(int n, int offset)
    {
        var x = Enumerable.Range(offset, n).Select(i => Enumerable.Range(0, 8).Select(j => ((7 * i + 3 * j) % 11 - 5) / 8.0).ToArray()).ToArray();
        var y = x.Select(r => r.Select((v, j) => 0.125 * (j + 1) * v).Sum() + 0.25).ToArray();
        return Tuple.Create(x, y);
    }

    static void OptimizeWithValidationAndTest()
    {
        var tup7_ = RanksAll(4, b =>
        {
            var tup101_ = LinearData(64, 0); var xt = tup101_.Item1; var yt = tup101_.Item2;
            var tup102_ = LinearData(16, 100); var xv = tup102_.Item1; var yv = tup102_.Item2;
            var tup103_ = LinearData(16, 200); var xs = tup103_.Item1; var ys = tup103_.Item2;
            var model = new Linear();
            var opts = new AdamOptimizerOptions<double, double[][], double[]> { LearningRate = 0.05, BatchSize = 16, MaxIterations = 30, EarlyStoppingPatience = 3, Tolerance = 1e-3, RandomSeed = 11 };
            using (var o = new ZeRO2Optimizer<double, double[][], double[]>(new AdamOptimizer<double, double[][], double[]>(model, opts), new ShardingConfiguration<double>(b)))
            {
                var r = o.Optimize(new OptimizationInputData<double, double[][], double[]> { XTrain = xt, YTrain = yt, XValidation = xv, YValidation = yv, XTest = xs, YTest = ys });
                Assert(r.ValidationResult.Present && r.TestResult.Present && r.TrainingResult.SampleCount == 64, "results of the three sets");
                Assert(r.BestFitnessScore <= r.FitnessHistory.Min() + opts.Tolerance && r.FitnessHistory.Contains(r.BestFitnessScore), "best chosen on the validation score");
                Assert(r.BestFitnessScore == r.ValidationResult.Loss, $"validation result is the best's ({r.ValidationResult.Loss} vs {r.BestFitnessScore})");
                Assert(r.FitnessHistory.Last() < r.FitnessHistory[0], "validation loss decreases");
                Assert(model.GetParameters().SequenceEqual(r.BestSolution), "the model gets the best solution");
                return r;
            }
        }); var res = tup7_.Item1; var errors = tup7_.Item2;
        Assert(errors.All(e => e == null), string.Join("; ", errors.Where(e => e != null)));
        Assert(res.All(r => r.BestSolution.SequenceEqual(res[0].BestSolution) && r.Epochs == res[0].Epochs), "ranks agree");
        Assert(res[0].StoppedEarly == (res[0].Epochs < 30), "StoppedEarly consistent");
        Console.WriteLine($"  {res[0].Epochs} epochs, stopped early: {res[0].StoppedEarly}, validation {res[0].ValidationResult.Loss:G4}, test {res[0].TestResult.Loss:G4}");
    }

    static void ShouldEarlyStopFollowsPatience()
    {
        var tup8_ = RanksAll(2, b =>
        {
            var tup104_ = LinearData(32, 0); var x = tup104_.Item1; var y = tup104_.Item2;
            var model = new Linear();
            // a learning rate of ~0 never improves by Tolerance: stop after 1 + patience epochs
            var opts = new AdamOptimizerOptions<double, double[][], double[]> { LearningRate = 1e-12, BatchSize = 8, MaxIterations = 50, EarlyStoppingPatience = 2, Tolerance = 1e-3 };
            using (var o = new DDPOptimizer<double, double[][], double[]>(new AdamOptimizer<double, double[][], double[]>(model, opts), new ShardingConfiguration<double>(b)))
            {
                var r = o.Optimize(new OptimizationInputData<double, double[][], double[]> { XTrain = x, YTrain = y });
                Assert(o.ShouldEarlyStop(), "ShouldEarlyStop after the run");
                opts.UseEarlyStopping = false;
                Assert(!o.ShouldEarlyStop(), "UseEarlyStopping=false never stops");
                return r;
            }
        }); var res = tup8_.Item1; var errors = tup8_.Item2;
        Assert(errors.All(e => e == null), string.Join("; ", errors.Where(e => e != null)));
        Assert(res[0].StoppedEarly && res[0].Epochs == 3, $"stopped after {res[0].Epochs} epochs");
    }

    static void NoModelIsAClearError()
    {
        using (var b = new InMemoryCommunicationBackend<double>(0, 1, "cs19-nomodel"))
        using (var o = new FSDPOptimizer<double>(new AdamOptimizer(), new ShardingConfiguration<double>(b)))
        {
            var e = Throws<ArgumentException>(() => o.Optimize(new OptimizationInputData<double, double[][], double[]> { XTrain = new double[1][], YTrain = new double[1] }));
            Assert(e.Message.Contains("carries no IGradientModel"), e.Message);
        }
        Throws<ArgumentNullException>(() => new AdamOptimizer<double, double[][], double[]>(null));
    }

    static void CollectivesBothTypes()
    {
        var tup9_ = RanksAll(4, b =>
        {
            int r = b.Rank;
            var sum = new[] { r + 1.0, 2.0 };
            b.AllReduce(sum, ReductionOperation.Sum);
            Assert(sum[0] == 10 && sum[1] == 8, "allreduce");
            var all = b.AllGather(new[] { r * 1.5 });
            Assert(all.SequenceEqual(new[] { 0, 1.5, 3, 4.5 }), "allgather");
            var mine = b.Scatter(r == 1 ? Enumerable.Range(0, 8).Select(i => (double)i).ToArray() : null, root: 1);
            Assert(mine.SequenceEqual(new[] { 2.0 * r, 2.0 * r + 1 }), "scatter");
            var part = b.ReduceScatter(Enumerable.Range(0, 8).Select(i => (double)i * (r + 1)).ToArray(), ReductionOperation.Sum);
            Assert(part.SequenceEqual(new[] { 20.0 * r, 10.0 * (2 * r + 1) }), $"reducescatter {string.Join(",", part)}");
            Assert(b.Broadcast(new[] { r + 0.5 }, root: 3)[0] == 3.5, "broadcast");
            if (r == 0) b.Send(new[] { 42.25, 7.0 }, 3, tag: 5);
            if (r == 3) Assert(b.Receive(0, 2, tag: 5).SequenceEqual(new[] { 42.25, 7.0 }), "send/receive");
            Assert(Throws<ArgumentException>(() => b.ReduceScatter(new double[6], ReductionOperation.Sum)).Message.Contains("4 equal parts"), "rs length");
            b.Barrier();
            return 0;
        }); var res = tup9_.Item1; var errors = tup9_.Item2;
        Assert(errors.All(e => e == null), string.Join("; ", errors.Where(e => e != null)));
        string env = "cs19-f32-" + Guid.NewGuid();
        var floats = new float[2][];
        var ts = Enumerable.Range(0, 2).Select(r => new Thread(() =>
        {
            using (var b = new InMemoryCommunicationBackend<float>(r, 2, env)) floats[r] = b.AllGather(new[] { r + 0.25f });
        })).ToList();
        ts.ForEach(t => t.Start()); ts.ForEach(t => t.Join());
        Assert(floats[1].SequenceEqual(new[] { 0.25f, 1.25f }), "float allgather");
    }

    static void LearningRateLive()
    {
        var tup10_ = RanksAll(2, b =>
        {
            var opts = new AdamOptimizerOptions { LearningRate = 0.01, MaxIterations = 1 };
            using (var o = new ZeRO2Optimizer<double>(new AdamOptimizer(opts), new ShardingConfiguration<double>(b)))
            {
                o.Initialize(Nine());
                Assert(o.LearningRate == 0.01, "initial");
                o.LearningRate = 0.02;
                Assert(o.LearningRate == 0.02, "set/get through the C ABI");
                var saved = o.Serialize();
                o.LearningRate = 0.03;
                o.Deserialize(saved);
                Assert(o.LearningRate == 0.02, $"the checkpoint's rate after a load (got {o.LearningRate})");
                o.GetOptions().LearningRate = 0.005;
                o.ZeroGrad();
                o.Step();
                Assert(o.LearningRate == 0.005, "GetOptions() changes apply");
                opts.LearningRateSchedule = LearningRateSchedule.StepDecay(2, 0.5); // epoch 0: the base, 0.005
                o.Optimize((p, g, s, d) => 1.0, new OptimizationInputData { NumSamples = 8 });
                Assert(o.LearningRate == 0.005, $"the schedule's rate of epoch 0 (got {o.LearningRate})");
                Assert(Throws<ArgumentException>(() => o.LearningRate = -1).Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT"), "negative rate");
            }
            var model = new Linear();
            var tup105_ = LinearData(16, 0); var x = tup105_.Item1; var y = tup105_.Item2;
            var mo = new AdamOptimizerOptions<double, double[][], double[]> { LearningRate = 0.1, MaxIterations = 5, BatchSize = 8, UseEarlyStopping = false };
            using (var o = new DDPOptimizer<double, double[][], double[]>(new AdamOptimizer<double, double[][], double[]>(model, mo), new ShardingConfiguration<double>(b)))
            {
                mo.LearningRateSchedule = LearningRateSchedule.StepDecay(2, 0.5);
                var r = o.Optimize(new OptimizationInputData<double, double[][], double[]> { XTrain = x, YTrain = y });
                Assert(r.LearningRateHistory.SequenceEqual(new[] { 0.1, 0.1, 0.05, 0.05, 0.025 }), string.Join(", ", r.LearningRateHistory));
                Assert(Math.Abs(o.LearningRate - 0.025) < 1e-15, $"step decay at epoch 4 (got {o.LearningRate})");
                Assert(Math.Abs(LearningRateSchedule.Cosine(10).Rate(10, 1.0)) < 1e-15 && LearningRateSchedule.Warmup(4).Rate(0, 1.0) == 0.25, "built-ins");
                o.Reset();
                Assert(o.StepCount == 0 && o.GetParameters().All(v => v == 0), "Reset: initial parameters, no steps");
            }
            return 0;
        }); var errors = tup10_.Item2;
        Assert(errors.All(e => e == null), string.Join("; ", errors.Where(e => e != null)));
    }

    static (string, Action)[] Group(string name)
    {
        switch (name)
        {
            case "safety": return new (string, Action)[] {
                ("ShortArraysRejected", ShortArraysRejected), ("ElementTypesChecked", ElementTypesChecked),
                ("ViewsAfterDisposeRaise", ViewsAfterDisposeRaise), ("BadCountsRejected", BadCountsRejected) };
            case "agreement": return new (string, Action)[] {
                ("LayoutMismatchFailsEveryRank", LayoutMismatchFailsEveryRank), ("OptionsMismatchFailsEveryRank", OptionsMismatchFailsEveryRank),
                ("InitialParametersBroadcast", InitialParametersBroadcast), ("ModelExceptionNamesRankEverywhere", ModelExceptionNamesRankEverywhere),
                ("NanLossReported", NanLossReported), ("UcxWithoutEnvironmentRaises", UcxWithoutEnvironmentRaises),
                ("UcxWorldSizeDisagreement", UcxWorldSizeDisagreement) };
            case "api": return new (string, Action)[] {
                ("OptimizeWithValidationAndTest", OptimizeWithValidationAndTest), ("ShouldEarlyStopFollowsPatience", ShouldEarlyStopFollowsPatience),
                ("NoModelIsAClearError", NoModelIsAClearError), ("CollectivesBothTypes", CollectivesBothTypes), ("LearningRateLive", LearningRateLive) };
            case "pipeline": return PipelineGroup(); // PipelineTests.cs
            case "async": return AsyncGroup(); // AsyncSgdTests.cs
            case "elastic": return new (string, Action)[] {
                ("ElasticResumesAtAnotherWorldSize", ElasticResumesAtAnotherWorldSize), ("ElasticErrors", ElasticErrors) };
            case "policy": return PolicyGroup(); // PolicyTests.cs
            case "planner": return PlannerGroup(); // PlannerTests.cs
            case "gpu": return GpuGroup(); // GpuTests.cs
            case "optimizers": return OptimizersGroup(); // OptimizerTests.cs
            case "gpu_emulated": return GpuEmulatedGroup(); // GpuEmulatedTests.cs: needs the CUDA stand-in preloaded
            default: throw new ArgumentException("unknown group " + name);
        }
    }
}
