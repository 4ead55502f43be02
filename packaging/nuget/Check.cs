// The NuGet package's check (packaging/nuget/test-nupkg.sh): compiled against the installed
// package alone; trains a linear model (the conformance suite's, tests/bindings/conformance) with
// ZeRO-2 over Adam on 2 in-process ranks (threads) and checks that the loss fell and that both ranks
// end with the same parameters.
using System;
using System.Threading;
using Shardopt.DistributedTraining;

static class Check
{
    const int WorldSize = 2;

    static int Main()
    {
        const int Samples = 64, D = 8;
        Func<long, int, double> xOf = (r, j) => (double)((7 * r + 3 * j) % 11 - 5) / 8.0;
        GradientModel model = (p, g, samples, dataset) => // mean 0.5 (w.x + b - y)^2 and its gradient
        {
            double loss = 0;
            var acc = new double[D + 1];
            foreach (long r in samples)
            {
                double err = p[D] - (0.25 + ((37 * r) % 17 - 8) / 16.0);
                for (int j = 0; j < D; ++j) err += p[j] * xOf(r, j) - 0.125 * (j + 1) * xOf(r, j);
                loss += 0.5 * err * err;
                for (int j = 0; j < D; ++j) acc[j] += err * xOf(r, j);
                acc[D] += err;
            }
            for (int k = 0; k <= D; ++k) g[k] = (float)(acc[k] / samples.Length);
            return loss / samples.Length;
        };
        var results = new OptimizationResult<float>[WorldSize];
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
                    using (var opt = new ZeRO2Optimizer(new AdamOptimizer(new AdamOptimizerOptions { InitialLearningRate = 0.05, BatchSize = 16, MaxIterations = 4 }),
                                                        new ShardingConfiguration(backend)))
                    {
                        opt.Initialize(new ParameterLayout().Add("weight", D).Add("bias", 1));
                        results[rank] = opt.Optimize(model, new OptimizationInputData { NumSamples = Samples });
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
