// ElasticOptimizer on in-process ranks (group "elastic"): a 4-rank job checkpointing every 2 steps is resumed by
// 3 ranks and ends equal, bit for bit, to a DDP optimizer saved at the same step and loaded by 3 ranks; argument
// and world-size errors.
using System;
using System.IO;
using System.Linq;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    static ElasticOptimizer MakeElastic(CommunicationBackend b, string dir)
    {
        var e = new ElasticOptimizer(new AdamOptimizer(new AdamOptimizerOptions { LearningRate = 3e-3 }),
                                     new ShardingConfiguration(b), minWorkers: 2, maxWorkers: 4)
            { CheckpointDirectory = dir, CheckpointEvery = 2 };
        e.Initialize(Model.Layout(), Model.InitialParameters());
        return e;
    }

    static void ElasticResumesAtAnotherWorldSize()
    {
        string root = Path.Combine(Path.GetTempPath(), "shardopt-cs-elastic-" + Guid.NewGuid().ToString("N"));
        string dir = Path.Combine(root, "elastic"), reference = Path.Combine(root, "reference");
        try
        {
            Ranks(4, b =>
            {
                using (var e = MakeElastic(b, dir))
                using (var twin = MakeAdam("ddp", b, true))
                {
                    Assert(e.ResumedStep == -1 && e.LastCheckpointStep == -1 && e.Generation == 0, "a fresh start");
                    Assert(e.CheckpointDirectory == dir && e.CheckpointEvery == 2, "the options in force");
                    TrainSteps(e, b.Rank, 0, 6);
                    TrainSteps(twin, b.Rank, 0, 6);
                    twin.SaveModel(reference);
                    e.FinishCheckpoint();
                    Assert(e.LastCheckpointStep == 6 && e.CheckpointsPublished == 3 && !e.CheckpointPending, "checkpoints at 2, 4, 6");
                    return 0;
                }
            });
            var res = Ranks(3, b =>
            {
                using (var e = MakeElastic(b, dir))
                using (var r = MakeAdam("ddp", b, false))
                {
                    Assert(e.ResumedStep == 6 && e.StepCount == 6, $"resumed at 6, not {e.ResumedStep}");
                    r.LoadModel(reference);
                    TrainSteps(e, b.Rank, 6, 4);
                    TrainSteps(r, b.Rank, 6, 4);
                    e.Checkpoint();
                    e.FinishCheckpoint();
                    Assert(e.LastCheckpointStep == 10, "checkpoint at 10");
                    return (e.GetParameters(), r.GetParameters());
                }
            });
            foreach (var pair in res) Assert(pair.Item1.SequenceEqual(pair.Item2), "3 resumed ranks equal the reference bit for bit");
        }
        finally { if (Directory.Exists(root)) Directory.Delete(root, true); }
    }

    static void ElasticErrors()
    {
        string dir = Path.Combine(Path.GetTempPath(), "shardopt-cs-elastic-" + Guid.NewGuid().ToString("N"));
        using (var b = new InMemoryCommunicationBackend(0, 1))
        {
            var adam = new AdamOptimizer(new AdamOptimizerOptions { LearningRate = 3e-3 });
            var cfg = new ShardingConfiguration(b);
            Assert(Throws<ArgumentException>(() => new ElasticOptimizer(adam, cfg, 3, 2)).Message.Contains("maxWorkers 2 is below minWorkers 3"), "max < min");
            Throws<ArgumentException>(() => new ElasticOptimizer<double>(adam, cfg, 0));
            var e = new ElasticOptimizer<float, float[], float[]>(adam, cfg, 2, 4) { CheckpointDirectory = dir };
            Throws<ArgumentException>(() => e.CheckpointEvery = -1);
            var outside = Throws<InvalidOperationException>(() => e.Initialize(Model.Layout()));
            Assert(outside.Message.Contains("the world has 1 ranks, outside [minWorkers 2, maxWorkers 4]"), outside.Message);
            Assert(!e.IsInitialized, "not initialized after the failure");
            Throws<InvalidOperationException>(() => { var _ = e.ResumedStep; });
            using (var one = new ElasticOptimizer(adam, cfg) { CheckpointDirectory = dir, CheckpointEvery = 3 })
            {
                one.Initialize(Model.Layout());
                Assert(one.CheckpointEvery == 3 && one.MinWorkers == 1 && one.MaxWorkers == 1024, "defaults and options");
                Throws<InvalidOperationException>(() => one.CheckpointEvery = 4);
            }
        }
        if (Directory.Exists(dir)) Directory.Delete(dir, true);
    }
}
