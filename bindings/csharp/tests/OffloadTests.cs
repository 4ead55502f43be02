// ZeRO-Offload's configuration with AiDotNet's names: CpuOffloadOptimizer, CpuOffloadGradients, CpuOffloadParams,
// CreateForZeROOffload, CreateForZeROOffloadFull. These optimizers keep their memory in host memory, where the flags
// reach the library, are accepted and change nothing: training is bit for bit the same, and so are the memory stats,
// with no host bytes beside the usual ones.
using System;
using System.Linq;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    static bool[] OffloadFlags(ShardingConfiguration c) => new[] { c.CpuOffloadOptimizer, c.CpuOffloadGradients, c.CpuOffloadParams };

    static void ZeROOffloadConfiguration()
    {
        using (var b = new InMemoryCommunicationBackend(0, 1, "cs-offload"))
        {
            Assert(OffloadFlags(new ShardingConfiguration(b)).SequenceEqual(new[] { false, false, false }), "off by default");
            Assert(OffloadFlags(ShardingConfiguration.CreateForZeROOffload(b)).SequenceEqual(new[] { true, false, false }),
                   "CreateForZeROOffload: the optimizer only");
            Assert(OffloadFlags(ShardingConfiguration.CreateForZeROOffloadFull(b)).SequenceEqual(new[] { true, true, true }),
                   "CreateForZeROOffloadFull: all three");
            using (var bd = new InMemoryCommunicationBackend<double>(0, 1, "cs-offload-d"))
                Assert(OffloadFlags(ShardingConfiguration<double>.CreateForZeROOffloadFull(bd)).SequenceEqual(new[] { true, true, true }),
                       "generic CreateForZeROOffloadFull too");
        }
        Throws<ArgumentNullException>(() => ShardingConfiguration.CreateForZeROOffload(null));
        Throws<ArgumentNullException>(() => ShardingConfiguration.CreateForZeROOffloadFull(null));
    }

    static void OffloadFlagsChangeNothingInHostMemory()
    {
        foreach (var strategy in new[] { "ddp", "zero2", "fsdp" })
        {
            var res = Ranks(2, b =>
            {
                var configs = new[] { new ShardingConfiguration(b), ShardingConfiguration.CreateForZeROOffloadFull(b) };
                return configs.Select(cfg =>
                {
                    var adam = new AdamOptimizer(Plain(new AdamOptimizerOptions { LearningRate = 3e-3 }, 128, 2));
                    ShardedOptimizer opt = strategy == "ddp" ? new DDPOptimizer(adam, cfg)
                        : strategy == "zero2" ? (ShardedOptimizer)new ZeRO2Optimizer(adam, cfg) : new FSDPOptimizer(adam, cfg);
                    using (opt)
                    {
                        opt.Initialize(Model.Layout(), Model.InitialParameters());
                        opt.Optimize(Model.Evaluate, new OptimizationInputData { NumSamples = Model.Samples });
                        return (opt.GetParameters(), opt.GetMemoryStats());
                    }
                }).ToArray();
            });
            foreach (var r in res)
            {
                var (plainParams, plain) = r[0];
                var (fullParams, full) = r[1];
                Assert(plainParams.SequenceEqual(fullParams), strategy + ": the same parameters bit for bit");
                Assert(plain.ParamsBytes == full.ParamsBytes && plain.GradsBytes == full.GradsBytes &&
                       plain.OptimizerStateBytes == full.OptimizerStateBytes && plain.BufferBytes == full.BufferBytes &&
                       plain.TotalBytes == full.TotalBytes && full.OptimizerStateBytes > 0, strategy + ": the same memory stats");
                Assert(full.HostParamsBytes == 0 && full.HostGradsBytes == 0 && full.HostOptimizerStateBytes == 0 && full.HostTotalBytes == 0,
                       strategy + ": no offloaded host bytes in host memory");
            }
        }
    }
}
