// Issue 32 (group "policy"): the training policy is the library's, and so are its errors. A rank that closes its in-memory
// backend, or throws before Optimize, fails the other ranks at once with SHARDOPT_ERR_PEER_LOST naming it (not after the
// 5-minute timeout); a call from another thread while an optimizer trains is reported by the library as such; the
// exceptions carry the status code and the rank; the options are checked by the library as they are set.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    // Every rank but `lost` trains the linear model with the data form; the others' errors, and how long they took.
    static Tuple<Exception[], double> PeerLost(int lost, Action<CommunicationBackend<double>, ShardedOptimizer<double>> lostRank)
    {
        var sw = Stopwatch.StartNew();
        var errors = RanksAll(3, b =>
        {
            b.SetTimeout(300000); // the default: a peer that goes must not cost it
            var data = LinearData(32, 0); var x = data.Item1; var y = data.Item2;
            var model = new Linear();
            var optimizer = new DDPOptimizer<double, double[][], double[]>(new AdamOptimizer<double, double[][], double[]>(model), new ShardingConfiguration<double>(b));
            using (optimizer)
            {
                if (b.Rank == lost) { lostRank(b, optimizer); return 0; }
                optimizer.Optimize(new OptimizationInputData<double, double[][], double[]> { XTrain = x, YTrain = y });
            }
            return 0;
        }).Item2;
        return Tuple.Create(errors, sw.Elapsed.TotalSeconds);
    }

    static void CheckPeerLost(Tuple<Exception[], double> run, int lost, string what)
    {
        var errors = run.Item1;
        Assert(run.Item2 < 30, $"{what}: the others failed after {run.Item2:F1} s");
        for (int r = 0; r < errors.Length; ++r)
        {
            if (r == lost) continue;
            var e = errors[r];
            Assert(e is InvalidOperationException && e.Message.StartsWith("SHARDOPT_ERR_PEER_LOST") && e.Message.Contains($"rank {lost} was lost"), $"{what}, rank {r}: {e}");
            var s = (IShardoptException)e;
            Assert(s.StatusCode == 5 && s.Rank == r, $"{what}, rank {r}: status {s.StatusCode}, rank {s.Rank}");
        }
    }

    static void ClosedBackendFailsPeersAtOnce()
    {
        var run = PeerLost(1, (b, o) => b.Dispose());
        Assert(run.Item1[1] == null, $"rank 1: {run.Item1[1]}");
        CheckPeerLost(run, 1, "rank 1 closed its backend");
    }

    static void ThrowBeforeOptimizeFailsPeersAtOnce()
    {
        // rank 2 throws before Optimize; its using blocks release the optimizer and the backend, as a program's would
        var run = PeerLost(2, (b, o) => { using (b) throw new FormatException("no data on rank 2"); });
        Assert(run.Item1[2] is FormatException, $"rank 2: {run.Item1[2]}");
        CheckPeerLost(run, 2, "rank 2 threw");
        // and after the optimizer was created (collectively) with the others: it holds the communicator until disposed
        var created = RanksAll(2, b =>
        {
            b.SetTimeout(300000);
            using (var o = new DDPOptimizer<double>(new AdamOptimizer(), new ShardingConfiguration<double>(b)))
            {
                o.Initialize(Nine());
                if (b.Rank == 1) throw new FormatException("rank 1 gives up");
                o.Optimize((p, g, s, d) => 1.0, new OptimizationInputData { NumSamples = 16 });
            }
            return 0;
        }).Item2;
        Assert(created[0] is InvalidOperationException && created[0].Message.Contains("SHARDOPT_ERR_PEER_LOST") && created[0].Message.Contains("rank 1 was lost"), $"{created[0]}");
    }

    static void CallFromAnotherThreadReported()
    {
        using (var b = new InMemoryCommunicationBackend<double>(0, 1, "cs-policy-threads"))
        using (var o = new DDPOptimizer<double>(new AdamOptimizer(new AdamOptimizerOptions { MaxIterations = 1 }), new ShardingConfiguration<double>(b)))
        {
            o.Initialize(Nine());
            Exception fromThread = null, fromCallback = null;
            o.Optimize((p, g, s, d) =>
            {
                var t = new Thread(() => { try { o.GetParameters(); } catch (Exception e) { fromThread = e; } });
                t.Start();
                t.Join();
                try { o.ZeroGrad(); } catch (Exception e) { fromCallback = fromCallback ?? e; }
                return 1.0;
            }, new OptimizationInputData { NumSamples = 4 });
            Assert(fromThread is InvalidOperationException && fromThread.Message.Contains("called from another thread while this optimizer trains"), $"{fromThread}");
            Assert(fromCallback is InvalidOperationException && fromCallback.Message.Contains("called from inside this optimizer's training loop"), $"{fromCallback}");
            Assert(o.GetParameters().Length == 9, "usable again once Optimize returned");
        }
    }

    // The lower-level Optimize has the form of Java's and Python's: the sets' sizes, and the set in each model call.
    static void LowerLevelOptimizeTakesSets()
    {
        using (var b = new InMemoryCommunicationBackend<double>(0, 1, "cs-policy-sets"))
        using (var o = new DDPOptimizer<double>(new AdamOptimizer(new AdamOptimizerOptions { MaxIterations = 2 }),
                                                new ShardingConfiguration<double>(b)))
        {
            o.Initialize(Nine());
            var seen = new Dictionary<Dataset, long>();
            var r = o.Optimize((p, g, s, d) =>
            {
                seen[d] = Math.Max(seen.TryGetValue(d, out long m) ? m : 0, s.ToArray().Max() + 1);
                return d == Dataset.Training ? 1.0 : d == Dataset.Validation ? 2.0 : 3.0;
            }, new OptimizationInputData { NumSamples = 8, NumValidationSamples = 4, NumTestSamples = 2 });
            Assert(seen.Count == 3 && seen[Dataset.Training] == 8 && seen[Dataset.Validation] == 4
                   && seen[Dataset.Test] == 2,
                   string.Join(", ", seen.Select(kv => $"{kv.Key}: {kv.Value}")));
            Assert(r.ValidationResult.Loss == 2.0 && r.ValidationResult.SampleCount == 4, $"{r.ValidationResult.Loss}");
            Assert(r.TestResult.Loss == 3.0 && r.TestResult.SampleCount == 2, $"{r.TestResult.Loss}");
            Assert(r.FitnessHistory.SequenceEqual(new[] { 2.0, 2.0 }), "an epoch's score is its validation loss");
        }
    }

    static void OptionsAreTheLibrarys()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-policy-options"))
        {
            var c = new ShardingConfiguration(b);
            Assert(c.MinimumParameterGroupSize == 1024 && ShardingConfiguration.CreateForHighBandwidth(b).MinimumParameterGroupSize == 512, "presets");
            var e = Throws<ArgumentException>(() => c.MaxGradNorm = -1);
            Assert(e is IShardoptException && ((IShardoptException)e).StatusCode == 1 && e.Message.Contains("max_grad_norm") && c.MaxGradNorm == 0, e.Message);
            Assert(Throws<ArgumentException>(() => c.LocalSteps = 0).Message.Contains("local_sgd_period is 0") && c.LocalSteps == 4,
                   "0 is no value to set (the library's shardopt_sharding_options_validate_strict)");
            var o = new RootMeanSquarePropagationOptimizerOptions();
            Assert(Throws<ArgumentException>(() => o.Epsilon = -1).Message.Contains("eps must be >= 0"), "eps");
            Assert(Throws<ArgumentException>(() => o.EarlyStoppingPatience = 0).Message.Contains("patience"), "patience >= 1");
            Assert(Throws<ArgumentException>(() => o.Tolerance = -1).Message.Contains("tolerance"), "tolerance >= 0");
            var custom = LearningRateSchedule.FromFunction((t, rate) => rate / (1 + t));
            Assert(custom.Rate(3, 1.0) == 0.25 && LearningRateSchedule.WarmupCosine(2, 4).Rate(0, 1.0) == 0.5, "schedules computed by the library");
            var failing = LearningRateSchedule.FromFunction((t, rate) => { throw new FormatException("no rate"); });
            Throws<FormatException>(() => failing.Rate(0, 1.0)); // a custom schedule's exception is its own
        }
    }

    static (string, Action)[] PolicyGroup() => new (string, Action)[] {
        ("ClosedBackendFailsPeersAtOnce", ClosedBackendFailsPeersAtOnce), ("ThrowBeforeOptimizeFailsPeersAtOnce", ThrowBeforeOptimizeFailsPeersAtOnce),
        ("CallFromAnotherThreadReported", CallFromAnotherThreadReported), ("OptionsAreTheLibrarys", OptionsAreTheLibrarys),
        ("LowerLevelOptimizeTakesSets", LowerLevelOptimizeTakesSets) };
}
