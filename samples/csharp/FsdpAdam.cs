// The seed example: an Adam optimizer wrapped in FSDPOptimizer, with a ShardingConfiguration over an
// in-memory backend of world size 4 (one thread per rank), trains the demo MLP with Optimize().
using System;
using System.Threading;
using Shardopt.DistributedTraining;

static class FsdpAdam
{
    const int WorldSize = 4;

    static int Main()
    {
        var model = new MlpDemo(samples: 1024);
        var results = new OptimizationResult<float>[WorldSize];
        var ranks = new Thread[WorldSize];
        for (int r = 0; r < WorldSize; ++r)
        {
            int rank = r;
            ranks[r] = new Thread(() =>
            {
                using (var backend = new InMemoryCommunicationBackend(rank, WorldSize, "fsdp-sample"))
                {
                    var config = new ShardingConfiguration(backend);
                    var adam = new AdamOptimizer(new AdamOptimizerOptions { InitialLearningRate = 3e-3, BatchSize = 256, MaxIterations = 6 });
                    using (var fsdp = new FSDPOptimizer(adam, config))
                    {
                        fsdp.Initialize(model.Layout(), model.InitialParameters());
                        results[rank] = fsdp.Optimize(model.Evaluate, new OptimizationInputData { NumSamples = model.Samples });
                    }
                }
            });
            ranks[r].Start();
        }
        foreach (var t in ranks) t.Join();
        var h = results[0].FitnessHistory;
        for (int e = 0; e < h.Length; ++e) Console.WriteLine($"epoch {e + 1}  loss {h[e]:F4}");
        if (!(h[h.Length - 1] < 0.9 * h[0])) { Console.Error.WriteLine("loss did not decrease"); return 1; }
        Console.WriteLine($"FSDP over {WorldSize} in-memory ranks, {results[0].Steps} steps: loss {h[0]:F4} -> {h[h.Length - 1]:F4}");
        return 0;
    }
}
