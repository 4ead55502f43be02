// The NuGet package's check (packaging/nuget/test-nupkg.sh): compiled against the installed
// package alone; trains the demo MLP with ZeRO-2 over Adam on 2 in-process ranks (threads) and
// checks that the loss fell and that both ranks end with the same parameters.
using System;
using System.Threading;
using Shardopt.DistributedTraining;

static class Check
{
    const int WorldSize = 2;

    static int Main()
    {
        var model = new MlpDemo(samples: 512);
        var results = new OptimizationResult[WorldSize];
        var errors = new Exception[WorldSize];
        var ranks = new Thread[WorldSize];
        for (int r = 0; r < WorldSize; ++r)
        {
            int rank = r;
            ranks[r] = new Thread(() =>
            {
                try
                {
                    using (var backend = new InMemoryCommunicationBackend(rank, WorldSize, "nupkg-check"))
                    using (var opt = new ZeRO2Optimizer(new AdamOptimizer(new AdamOptimizerOptions { LearningRate = 3e-3 }),
                                                        new ShardingConfiguration(backend)))
                    {
                        opt.Initialize(model.Layout(), model.InitialParameters());
                        results[rank] = opt.Optimize(model.Evaluate, new OptimizationInputData { NumSamples = model.Samples, BatchSize = 128, Epochs = 4 });
                    }
                }
                catch (Exception e) { errors[rank] = e; }
            });
            ranks[r].Start();
        }
        foreach (var t in ranks) t.Join();
        for (int r = 0; r < WorldSize; ++r)
            if (errors[r] != null) { Console.Error.WriteLine($"rank {r}: {errors[r]}"); return 1; }
        var h = results[0].FitnessHistory;
        if (!(h[h.Length - 1] < h[0])) { Console.Error.WriteLine("loss did not decrease"); return 1; }
        var p0 = results[0].BestSolution; var p1 = results[1].BestSolution;
        if (p0.Length != p1.Length) { Console.Error.WriteLine("ranks disagree on the parameter count"); return 1; }
        for (int i = 0; i < p0.Length; ++i)
            if (!p0[i].Equals(p1[i])) { Console.Error.WriteLine($"ranks disagree on parameter {i}"); return 1; }
        Console.WriteLine($"ZeRO-2 over {WorldSize} in-process ranks from the NuGet package: loss {h[0]:F4} -> {h[h.Length - 1]:F4}");
        return 0;
    }
}
