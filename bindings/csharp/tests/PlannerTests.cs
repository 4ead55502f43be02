// The planner from C# (group "planner"): the strategies that fit first, fastest first (7e9 parameters on 8 GPUs of 80 GB:
// DDP's 16 bytes a parameter do not fit, FSDP does); RankMemory equals GetMemoryStats() on every rank; bad input is the
// library's ShardoptArgumentException naming it.
using System;
using System.Linq;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    static void PlanOrdersAndFits()
    {
        // (no digit separators here: mono's mcs reads 80_000_000_000L as 80000000000000)
        var plans = Planner.Plan(7e9, new PlanCluster { RanksPerHost = 8, Gpus = true, DeviceMemoryBytes = 80000000000L, IntraBandwidth = 900e9 }, 2.0);
        int fitting = plans.TakeWhile(p => p.Fits).Count();
        Assert(fitting > 0 && fitting < plans.Count && plans.Skip(fitting).All(p => !p.Fits), $"those that fit first: {fitting} of {plans.Count}: {string.Join(", ", plans)}");
        for (int i = 1; i < fitting; ++i) Assert(plans[i].StepSeconds >= plans[i - 1].StepSeconds, "fastest first");
        var ddp = plans.First(p => p.Name == "ddp");
        Assert(!ddp.Fits && ddp.DeviceBytes == 112000000000L, "ddp: 16 bytes a parameter, does not fit: " + ddp.DeviceBytes);
        Assert(plans.Any(p => p.Name == "fsdp" && p.Fits && p.OptimizerStateBytes == 7000000000L), "fsdp fits, 8 bytes of state / 8 ranks");
        Assert(plans.All(p => p.StepSeconds >= p.ComputeSeconds), "a step is at least its compute");
    }

    static void RankMemoryIsMemoryStats()
    {
        foreach (var strategy in new[] { "zero2", "fsdp" })
        {
            var same = Ranks(3, b =>
            {
                var layout = new ParameterLayout().AddMatrix("w", 40, 30).Add("b", 7);
                var cfg = new ShardingConfiguration(b);
                var adam = new AdamOptimizer();
                ShardedOptimizer opt = strategy == "zero2" ? (ShardedOptimizer)new ZeRO2Optimizer(adam, cfg) : new FSDPOptimizer(adam, cfg);
                using (opt)
                {
                    opt.Initialize(layout);
                    for (int u = 0; u < opt.BucketCount; ++u) { opt.Gather(u); opt.Release(u); } // a forward over the units, then a step
                    opt.ZeroGrad();
                    opt.Step();
                    MemoryStats m = opt.GetMemoryStats(), p = Planner.RankMemory(layout, strategy, b.WorldSize, b.Rank, cfg);
                    return m.ParamsBytes == p.ParamsBytes && m.GradsBytes == p.GradsBytes && m.OptimizerStateBytes == p.OptimizerStateBytes &&
                           m.BufferBytes == p.BufferBytes && m.PeakBufferBytes == p.PeakBufferBytes && m.TotalBytes == p.TotalBytes &&
                           m.CompressionBytes == p.CompressionBytes && p.OptimizerStateBytes > 0;
                }
            });
            Assert(same.All(x => x), strategy + ": RankMemory equals GetMemoryStats on every rank");
        }
    }

    static void PlanBadInputNamed()
    {
        var e = Throws<ShardoptArgumentException>(() => Planner.Plan(7e9, new PlanCluster { RanksPerHost = 8, Gpus = true }, 1.0));
        Assert(e.Message.Contains("device_memory_bytes"), e.Message);
        e = Throws<ShardoptArgumentException>(() => Planner.Plan(0, new PlanCluster { RanksPerHost = 8 }, 1.0));
        Assert(e.Message.Contains("parameter count"), e.Message);
        Throws<ArgumentException>(() => Planner.RankMemory(new ParameterLayout().Add("w", 4), "zero9", 1, 0));
        Throws<ArgumentNullException>(() => Planner.Plan(1e6, null, 1.0));
    }

    static (string, Action)[] PlannerGroup() => new (string, Action)[] {
        ("PlanOrdersAndFits", PlanOrdersAndFits), ("RankMemoryIsMemoryStats", RankMemoryIsMemoryStats), ("PlanBadInputNamed", PlanBadInputNamed) };
}
