// The seed example of AiDotNet's FSDPOptimizer page, ported: only the using line and the model class differ
// from AiDotNet code (the lines between "seed example" markers are AiDotNet's, with rank: 0 made rank: rank).
//
//   mono PortedFsdp.exe inmemory [--reference REF_BINARY [--shuffle-seed S]]   4 threads, compared with 1 rank
//   tools/shardopt-run -n 4 -- mono PortedFsdp.exe ucx                        4 UCX processes, likewise
//
// The model is the reference linear model of bindings/README.md; with --reference the final parameters
// must equal, bit for bit, those of the C++ core (tests/bindings/reference_f64.cpp) on the same data.
using System;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using Shardopt.DistributedTraining; // AiDotNet: using AiDotNet.DistributedTraining; (and its LinearAlgebra, Optimizers, ...)

// ---- the model class (AiDotNet: your IFullModel) ----
sealed class LinearModel : IGradientModel<double, Tensor<double>, Tensor<double>>
{
    readonly int d;
    double[] parameters;
    public LinearModel(int features) { d = features; parameters = new double[d + 1]; }
    public ParameterLayout GetParameterLayout() => new ParameterLayout().Add("weight", d).Add("bias", 1);
    public double[] GetParameters() => (double[])parameters.Clone();
    public void SetParameters(double[] p) => parameters = (double[])p.Clone();
    public int SampleCount(Tensor<double> x) => x.Shape[0];

    // err_i = (sum_j w[j] x[i][j]) + b - y[i]; loss = sum 0.5 err^2 / m; grads in the same order as the reference
    public double ComputeLossAndGradient(ReadOnlySpan<double> p, Span<double> g, Tensor<double> x, Tensor<double> y, ReadOnlySpan<long> samples)
    {
        int m = samples.Length;
        double loss = 0, gb = 0;
        var gw = new double[d];
        foreach (long s in samples)
        {
            int i = (int)s;
            double acc = 0;
            for (int j = 0; j < d; ++j) acc += p[j] * x[i, j];
            double err = acc + p[d] - y[i];
            loss += 0.5 * err * err;
            for (int j = 0; j < d; ++j) gw[j] += err * x[i, j];
            gb += err;
        }
        for (int j = 0; j < d; ++j) g[j] = gw[j] / m;
        g[d] = gb / m;
        return loss / m;
    }
}

static class PortedFsdp
{
    const int N = 64, D = 8;

    static (Tensor<double>, Tensor<double>) Data()
    {
        var x = new Tensor<double>(new[] { N, D });
        var y = new Tensor<double>(new[] { N });
        for (int i = 0; i < N; ++i)
        {
            double acc = 0;
            for (int j = 0; j < D; ++j) { x[i, j] = ((7 * i + 3 * j) % 11 - 5) / 8.0; acc += 0.125 * (j + 1) * x[i, j]; }
            y[i] = acc + 0.25;
        }
        return (x, y);
    }

    static double[] Train(Func<CommunicationBackend<double>> makeBackend, ulong? shuffleSeed)
    {
        var (x, y) = Data();
        var model = new LinearModel(D);
        var options = new AdamOptimizerOptions<double, Tensor<double>, Tensor<double>>
        {
            LearningRate = 0.05, BatchSize = 16, MaxIterations = 5, UseEarlyStopping = false,
            ShuffleData = shuffleSeed.HasValue, RandomSeed = shuffleSeed ?? 0
        };
        var inputData = new OptimizationInputData<double, Tensor<double>, Tensor<double>> { XTrain = x, YTrain = y };

        // ---- seed example (AiDotNet's FSDPOptimizer page) ----
        var optimizer = new AdamOptimizer<double, Tensor<double>, Tensor<double>>(model, options);
        var backend = makeBackend(); // AiDotNet: new InMemoryCommunicationBackend<double>(rank: 0, worldSize: 4)
        var config = new ShardingConfiguration<double>(backend);
        var fsdpOptimizer = new FSDPOptimizer<double, Tensor<double>, Tensor<double>>(optimizer, config);
        var result = fsdpOptimizer.Optimize(inputData);
        // ---- end of seed example ----

        var final = fsdpOptimizer.GetParameters();
        if (backend.Rank == 0)
            Console.WriteLine($"world {backend.WorldSize}: training loss {result.TrainingLossHistory[0]:G6} -> {result.TrainingLossHistory.Last():G6}, " +
                              $"best {result.BestFitnessScore:G6}, {result.Iterations} steps");
        fsdpOptimizer.Dispose();
        backend.Dispose();
        return final;
    }

    static double[] FourThreads(ulong? seed)
    {
        var results = new double[4][];
        var errors = new Exception[4];
        var threads = Enumerable.Range(0, 4).Select(r => new Thread(() =>
        {
            try { results[r] = Train(() => new InMemoryCommunicationBackend<double>(rank: r, worldSize: 4), seed); }
            catch (Exception e) { errors[r] = e; }
        })).ToList();
        threads.ForEach(t => t.Start());
        threads.ForEach(t => t.Join());
        foreach (var e in errors) if (e != null) throw e;
        for (int r = 1; r < 4; ++r) if (!results[r].SequenceEqual(results[0])) throw new Exception($"rank {r} ends with other parameters than rank 0");
        return results[0];
    }

    static double[] SingleProcess(ulong? seed) =>
        Train(() => new InMemoryCommunicationBackend<double>(rank: 0, worldSize: 1, environmentId: "single-" + Guid.NewGuid()), seed);

    static bool SameAsSingle(double[] p, double[] single)
    {
        double worst = p.Zip(single, (a, b) => Math.Abs(a - b)).Max();
        bool bitwise = p.Select(BitConverter.DoubleToInt64Bits).SequenceEqual(single.Select(BitConverter.DoubleToInt64Bits));
        Console.WriteLine($"4 ranks vs 1 process: {(bitwise ? "bit for bit equal" : $"largest difference {worst:G3}")}");
        return worst <= 1e-12;
    }

    static int Main(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "inmemory";
        int refAt = Array.IndexOf(args, "--reference"), seedAt = Array.IndexOf(args, "--shuffle-seed");
        ulong? seed = seedAt >= 0 ? ulong.Parse(args[seedAt + 1]) : (ulong?)null;
        double[] p;
        if (mode == "ucx")
        {
            int rank = -1;
            p = Train(() => { var b = new UcxCommunicationBackend<double>(); rank = b.Rank; return b; }, seed);
            if (!SameAsSingle(p, SingleProcess(seed))) return 1;
            Console.WriteLine($"ucx rank {rank} ok");
            return 0;
        }
        p = FourThreads(seed);
        if (!SameAsSingle(p, SingleProcess(seed))) return 1;
        if (refAt >= 0)
        {
            var psi = new ProcessStartInfo(args[refAt + 1], "--ranks 4 --strategy fsdp --epochs 5 --batch 16 --lr 0.05" +
                                           (seed.HasValue ? $" --shuffle-seed {seed}" : ""))
            { UseShellExecute = false, RedirectStandardOutput = true };
            var proc = Process.Start(psi);
            var lines = proc.StandardOutput.ReadToEnd().Split(new[] { '\n' }, StringSplitOptions.RemoveEmptyEntries);
            proc.WaitForExit();
            if (proc.ExitCode != 0) { Console.Error.WriteLine($"reference exited {proc.ExitCode}"); return 1; }
            var reference = lines.Select(l => long.Parse(l.Trim())).ToArray();
            var mine = p.Select(BitConverter.DoubleToInt64Bits).ToArray();
            if (!mine.SequenceEqual(reference))
            {
                for (int i = 0; i < Math.Max(mine.Length, reference.Length); ++i)
                    Console.Error.WriteLine($"  [{i}] C# {(i < mine.Length ? BitConverter.Int64BitsToDouble(mine[i]).ToString("R") : "-")}" +
                                            $"  C++ {(i < reference.Length ? BitConverter.Int64BitsToDouble(reference[i]).ToString("R") : "-")}");
                Console.Error.WriteLine("the C# f64 result differs from the C++ core's");
                return 1;
            }
            Console.WriteLine($"bit for bit equal to the C++ core's f64 reference ({reference.Length} parameters)");
        }
        return 0;
    }
}
