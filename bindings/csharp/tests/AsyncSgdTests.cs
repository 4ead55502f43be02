// AsyncSGDOptimizer on 4 in-memory ranks: staleness 0 is DDP bit for bit; at staleness 2 every rank ends with the
// same parameters and training converges; misuse throws. Run with --group async.
using System;
using System.Linq;
using Shardopt.DistributedTraining;
using FloatResult = Shardopt.DistributedTraining.OptimizationResult<float>;

static partial class ShardoptTests
{
    static System.Collections.Generic.List<(FloatResult, float[], long)> TrainAsync(int staleness, bool async) => Ranks(4, b =>
    {
        var adam = new AdamOptimizer(Plain(new AdamOptimizerOptions { LearningRate = 3e-3 }, 64, 3));
        var cfg = new ShardingConfiguration(b);
        ShardedOptimizer opt = async ? new AsyncSGDOptimizer(adam, cfg, staleness) : (ShardedOptimizer)new DDPOptimizer(adam, cfg);
        using (opt)
        {
            opt.Initialize(Model.Layout(), Model.InitialParameters());
            var r = opt.Optimize(Model.Evaluate, new OptimizationInputData { NumSamples = Model.Samples });
            return (r, opt.GetParameters(), opt.StepCount);
        }
    });

    static void AsyncStaleness0IsDdpBitForBit()
    {
        var ddp = TrainAsync(0, false);
        var async = TrainAsync(0, true);
        for (int r = 0; r < 4; ++r)
        {
            Assert(async[r].Item2.SequenceEqual(ddp[0].Item2), $"rank {r}: DDP's parameters bit for bit");
            Assert(async[r].Item1.FitnessHistory.SequenceEqual(ddp[0].Item1.FitnessHistory), $"rank {r}: DDP's losses");
        }
    }

    static void AsyncStaleness2TrainsAndRanksAgree()
    {
        var async = TrainAsync(2, true);
        var h = async[0].Item1.FitnessHistory;
        Assert(h[h.Length - 1] < 0.8 * h[0], $"the loss fell: {h[0]} -> {h[h.Length - 1]}");
        Assert(async[0].Item3 == 3L * Model.Samples / 64, "one update per clock");
        for (int r = 1; r < 4; ++r) Assert(async[r].Item2.SequenceEqual(async[0].Item2), $"rank {r} agrees with rank 0");
    }

    static void AsyncMisuseThrows()
    {
        Ranks(1, b =>
        {
            // the library's check of the staleness, at once
            var negative = Throws<ArgumentException>(() => new AsyncSGDOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), -1));
            Assert(negative.Message.Contains("async_staleness must be in [0"), negative.Message);
            using (var opt = new AsyncSGDOptimizer<float, double[], double>(new AdamOptimizer(), new ShardingConfiguration(b), 3))
            {
                Assert(opt.AllowStaleness == 3, "AllowStaleness");
                opt.Initialize(Model.Layout(), Model.InitialParameters());
                var e = Throws<NotSupportedException>(() => opt.Step());
                Assert(e.Message.Contains("optimize()"), e.Message);
            }
            return 0;
        });
    }

    static (string, Action)[] AsyncGroup() => new (string, Action)[] {
        ("AsyncStaleness0IsDdpBitForBit", AsyncStaleness0IsDdpBitForBit),
        ("AsyncStaleness2TrainsAndRanksAgree", AsyncStaleness2TrainsAndRanksAgree), ("AsyncMisuseThrows", AsyncMisuseThrows) };
}
