// The seed example of AiDotNet's FSDPOptimizer page, ported: only the using line and the model class differ from
// AiDotNet code (the lines between the "seed example" markers are the page's, with rank: 0 made rank: rank, as each of
// the 4 in-memory ranks runs it on its own thread). The model is the conformance suite's linear model and the data its
// training set (tests/bindings/conformance/README.md); the options are AdamOptimizerOptions' defaults. Rank 0 prints the
// result in the suite's output format as run `seed_example`, which ctest samples.csharp_seed_example compares with the C
// driver's bit for bit.
//   mono PortedFsdp.exe        (arguments are ignored)
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using Shardopt.DistributedTraining; // AiDotNet: using AiDotNet.DistributedTraining; (and its LinearAlgebra, Optimizers, ...)

// ---- the model class (AiDotNet: your IFullModel): x[r][j] = ((7r + 3j) mod 11 - 5) / 8, y[r] = sum 0.125 (j + 1) x[r][j]
// + 0.25 + ((37r) mod 17 - 8) / 16; loss = mean of 0.5 err^2 with err = w.x + b - y, every sum in order ----
sealed class LinearModel : IGradientModel<double, Tensor<double>, Tensor<double>>
{
    const int D = 8;
    double[] parameters = new double[D + 1];

    public static (Tensor<double>, Tensor<double>) TrainingSet(int rows = 64)
    {
        var x = new Tensor<double>(new[] { rows, D });
        var y = new Tensor<double>(new[] { rows });
        for (int r = 0; r < rows; ++r)
        {
            double acc = 0.0;
            for (int j = 0; j < D; ++j) { x[r, j] = (double)((7 * r + 3 * j) % 11 - 5) / 8.0; acc += 0.125 * (double)(j + 1) * x[r, j]; }
            y[r] = acc + 0.25 + (double)((37 * r) % 17 - 8) / 16.0;
        }
        return (x, y);
    }

    public ParameterLayout GetParameterLayout() => new ParameterLayout().Add("weight", D).Add("bias", 1);
    public double[] GetParameters() => (double[])parameters.Clone();
    public void SetParameters(double[] p) => parameters = (double[])p.Clone();
    public int SampleCount(Tensor<double> x) => x.Shape[0];

    public double ComputeLossAndGradient(ReadOnlySpan<double> p, Span<double> g, Tensor<double> x, Tensor<double> y, ReadOnlySpan<long> samples)
    {
        double loss = 0.0, gb = 0.0;
        var gw = new double[D];
        foreach (long s in samples)
        {
            int i = (int)s;
            double pred = 0.0;
            for (int j = 0; j < D; ++j) pred += p[j] * x[i, j];
            double err = pred + p[D] - y[i];
            loss += 0.5 * err * err;
            for (int j = 0; j < D; ++j) gw[j] += err * x[i, j];
            gb += err;
        }
        for (int j = 0; j < D; ++j) g[j] = gw[j] / samples.Length;
        g[D] = gb / samples.Length;
        return loss / samples.Length;
    }
}

static class PortedFsdp
{
    static string Line(string word, IEnumerable<double> values) => word + string.Concat(values.Select(v => " " + BitConverter.DoubleToInt64Bits(v).ToString("x16"))) + "\n";

    static string Rank(int rank)
    {
        var model = new LinearModel();
        var options = new AdamOptimizerOptions<double, Tensor<double>, Tensor<double>>();
        var (x, y) = LinearModel.TrainingSet();
        var inputData = new OptimizationInputData<double, Tensor<double>, Tensor<double>> { XTrain = x, YTrain = y };

        // ---- seed example (AiDotNet's FSDPOptimizer page) ----
        // Original optimizer
        var optimizer = new AdamOptimizer<double, Tensor<double>, Tensor<double>>(model, options);

        // Wrap it for FSDP distributed training
        var backend = new InMemoryCommunicationBackend<double>(rank: rank, worldSize: 4);
        var config = new ShardingConfiguration<double>(backend);
        var fsdpOptimizer = new FSDPOptimizer<double, Tensor<double>, Tensor<double>>(optimizer, config);

        // Now optimize as usual - FSDP magic happens automatically!
        var result = fsdpOptimizer.Optimize(inputData);
        // ---- end of seed example ----

        var final = fsdpOptimizer.GetParameters();
        fsdpOptimizer.Dispose();
        backend.Dispose();
        return "run seed_example\n" + Line("params", final) + Line("best", result.BestSolution) + Line("training", result.TrainingLossHistory) +
               Line("validation", result.ValidationLossHistory) + Line("lr", result.LearningRateHistory) +
               $"counts {result.Iterations} {result.Steps} {result.BestEpoch} {(result.StoppedEarly ? 1 : 0)}\n" +
               Line("losses", new[] { result.BestFitnessScore, result.TrainingResult.Loss, result.ValidationResult.Loss, result.TestResult.Loss });
    }

    static int Main()
    {
        var outputs = new string[4];
        var errors = new Exception[4];
        var threads = Enumerable.Range(0, 4).Select(r => new Thread(() => { try { outputs[r] = Rank(r); } catch (Exception e) { errors[r] = e; } })).ToList();
        threads.ForEach(t => t.Start());
        threads.ForEach(t => t.Join());
        for (int r = 0; r < 4; ++r)
        {
            if (errors[r] != null) { Console.Error.WriteLine($"rank {r}: {errors[r]}"); return 1; }
            if (outputs[r] != outputs[0]) { Console.Error.WriteLine($"rank {r} ends with other results than rank 0"); return 1; }
        }
        Console.Write(outputs[0]);
        return 0;
    }
}
