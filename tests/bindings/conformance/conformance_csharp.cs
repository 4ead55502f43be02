// The conformance suite's C# driver (README.md in this folder): every run of runs.txt through the C# binding's
// idiomatic API: AiDotNet's data form (OptimizationInputData with XTrain ... YTest) with a model class computing the
// README's model, InMemoryCommunicationBackend<T> ranks on threads, the optimizer class of `strategy`, the options
// class of `optimizer`; a key that is absent is not set, so the binding's defaults (the library's) apply.
// Usage: mono conformance_csharp.exe RUNS_FILE [RUN_NAME...]
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using Shardopt.DistributedTraining;

// The README's model: a linear model in doubles, rows of the data given by their numbers.
sealed class ConformanceModel<T> : IGradientModel<T, Tensor<double>, Tensor<double>> where T : struct
{
    const int Features = 8;
    T[] parameters = new T[Features + 1];

    public static double Feature(long r, int j) => (double)((7 * r + 3 * j) % 11 - 5) / 8.0;

    public static double Target(long r)
    {
        double acc = 0.0;
        for (int j = 0; j < Features; ++j) acc += 0.125 * (double)(j + 1) * Feature(r, j);
        return acc + 0.25 + (double)((37 * r) % 17 - 8) / 16.0;
    }

    // Rows [first, first + count): x is count x 8, y is count.
    public static (Tensor<double>, Tensor<double>) Rows(int first, int count)
    {
        var x = new Tensor<double>(new[] { count, Features });
        var y = new Tensor<double>(new[] { count });
        for (int i = 0; i < count; ++i)
        {
            for (int j = 0; j < Features; ++j) x[i, j] = Feature(first + i, j);
            y[i] = Target(first + i);
        }
        return (x, y);
    }

    // The weight declared as a rows x cols matrix of the 8 (the run's `matrix` key), or as 8 elements.
    readonly long rows, cols;
    public ConformanceModel(long rows = 0, long cols = 0) { this.rows = rows; this.cols = cols; }

    public ParameterLayout GetParameterLayout() =>
        (rows > 0 ? new ParameterLayout().AddMatrix("weight", rows, cols) : new ParameterLayout().Add("weight", Features)).Add("bias", 1);
    public T[] GetParameters() => (T[])parameters.Clone();
    public void SetParameters(T[] p) => parameters = (T[])p.Clone();
    public int SampleCount(Tensor<double> x) => x.Shape[0];

    public double ComputeLossAndGradient(ReadOnlySpan<T> parameters, Span<T> gradient, Tensor<double> x, Tensor<double> y, ReadOnlySpan<long> samples)
    {
        var p = new double[Features + 1];
        for (int k = 0; k <= Features; ++k) p[k] = typeof(T) == typeof(float) ? (double)MemoryMarshal.Cast<T, float>(parameters)[k] : MemoryMarshal.Cast<T, double>(parameters)[k];
        var gw = new double[Features];
        double gb = 0.0, loss = 0.0;
        foreach (long s in samples)
        {
            int i = (int)s;
            double pred = 0.0;
            for (int j = 0; j < Features; ++j) pred += p[j] * x[i, j];
            double err = pred + p[Features] - y[i];
            loss += 0.5 * err * err;
            for (int j = 0; j < Features; ++j) gw[j] += err * x[i, j];
            gb += err;
        }
        double n = samples.Length;
        Span<float> gf = typeof(T) == typeof(float) ? MemoryMarshal.Cast<T, float>(gradient) : Span<float>.Empty;
        Span<double> gd = typeof(T) == typeof(double) ? MemoryMarshal.Cast<T, double>(gradient) : Span<double>.Empty;
        for (int k = 0; k <= Features; ++k)
        {
            double g = (k < Features ? gw[k] : gb) / n;
            if (typeof(T) == typeof(float)) gf[k] = (float)g;
            else gd[k] = g;
        }
        return loss / n;
    }
}

static class ConformanceCSharp
{
    const int Train = 64, Valid = 32, Test = 16;

    static string Hex(double v) => BitConverter.DoubleToInt64Bits(v).ToString("x16");
    static string Line(string word, IEnumerable<double> values) => word + string.Concat(values.Select(v => " " + Hex(v))) + "\n";
    static double Double<T>(T v) where T : struct => typeof(T) == typeof(float) ? (double)(float)(object)v : (double)(object)v;

    static Optimizer Base<T>(string name, IGradientModel<T, Tensor<double>, Tensor<double>> model, OptimizerOptions options) where T : struct
    {
        switch (name)
        {
            case "sgd": return new StochasticGradientDescentOptimizer<T, Tensor<double>, Tensor<double>>(model, (StochasticGradientDescentOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "momentum": return new MomentumOptimizer<T, Tensor<double>, Tensor<double>>(model, (MomentumOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "adam": return new AdamOptimizer<T, Tensor<double>, Tensor<double>>(model, (AdamOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "adamw": return new AdamWOptimizer<T, Tensor<double>, Tensor<double>>(model, (AdamWOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "rmsprop": return new RootMeanSquarePropagationOptimizer<T, Tensor<double>, Tensor<double>>(model, (RootMeanSquarePropagationOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "adagrad": return new AdagradOptimizer<T, Tensor<double>, Tensor<double>>(model, (AdagradOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "lamb": return new LambOptimizer<T, Tensor<double>, Tensor<double>>(model, (LambOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "lion": return new LionOptimizer<T, Tensor<double>, Tensor<double>>(model, (LionOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "adafactor": return new AdafactorOptimizer<T, Tensor<double>, Tensor<double>>(model, (AdafactorOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "nadam": return new NadamOptimizer<T, Tensor<double>, Tensor<double>>(model, (NadamOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "adamax": return new AdaMaxOptimizer<T, Tensor<double>, Tensor<double>>(model, (AdaMaxOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "adadelta": return new AdaDeltaOptimizer<T, Tensor<double>, Tensor<double>>(model, (AdaDeltaOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
            case "muon": return new MuonOptimizer<T, Tensor<double>, Tensor<double>>(model, (MuonOptimizerOptions<T, Tensor<double>, Tensor<double>>)options);
        }
        throw new ArgumentException("unknown optimizer " + name);
    }

    static OptimizerOptions Options<T>(string name) where T : struct
    {
        switch (name)
        {
            case "sgd": return new StochasticGradientDescentOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "momentum": return new MomentumOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "adam": return new AdamOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "adamw": return new AdamWOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "rmsprop": return new RootMeanSquarePropagationOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "adagrad": return new AdagradOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "lamb": return new LambOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "lion": return new LionOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "adafactor": return new AdafactorOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "nadam": return new NadamOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "adamax": return new AdaMaxOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "adadelta": return new AdaDeltaOptimizerOptions<T, Tensor<double>, Tensor<double>>();
            case "muon": return new MuonOptimizerOptions<T, Tensor<double>, Tensor<double>>();
        }
        throw new ArgumentException("unknown optimizer " + name);
    }

    static ShardedOptimizer<T> Sharded<T>(Dictionary<string, string> r, Optimizer wrapped, ShardingConfiguration<T> config) where T : struct
    {
        switch (r["strategy"])
        {
            case "ddp": return new DDPOptimizer<T, Tensor<double>, Tensor<double>>(wrapped, config);
            case "zero1": return new ZeRO1Optimizer<T, Tensor<double>, Tensor<double>>(wrapped, config);
            case "zero2": return new ZeRO2Optimizer<T, Tensor<double>, Tensor<double>>(wrapped, config);
            case "fsdp": return new FSDPOptimizer<T, Tensor<double>, Tensor<double>>(wrapped, config);
            case "local_sgd": return new LocalSGDOptimizer<T, Tensor<double>, Tensor<double>>(wrapped, config);
            case "async_sgd":
                return r.TryGetValue("staleness", out var s) ? new AsyncSGDOptimizer<T, Tensor<double>, Tensor<double>>(wrapped, config, int.Parse(s))
                                                             : new AsyncSGDOptimizer<T, Tensor<double>, Tensor<double>>(wrapped, config);
            case "hybrid":
                DataParallelStrategy? data = null;
                if (r.TryGetValue("data_strategy", out var d))
                    data = d == "ddp" ? DataParallelStrategy.DDP : d == "zero1" ? DataParallelStrategy.ZeRO1 : d == "zero2" ? DataParallelStrategy.ZeRO2 : DataParallelStrategy.FSDP;
                return new HybridShardedOptimizer<T, Tensor<double>, Tensor<double>>(wrapped, config, dataStrategy: data);
        }
        throw new ArgumentException("unknown strategy " + r["strategy"]);
    }

    static ShardingConfiguration<T> Configuration<T>(Dictionary<string, string> r, CommunicationBackend<T> backend) where T : struct
    {
        string v;
        var c = !r.TryGetValue("preset", out v) ? new ShardingConfiguration<T>(backend)
              : v == "default" ? ShardingConfiguration<T>.CreateDefault(backend)
              : v == "high_bandwidth" ? ShardingConfiguration<T>.CreateForHighBandwidth(backend)
              : v == "low_bandwidth" ? ShardingConfiguration<T>.CreateForLowBandwidth(backend) : throw new ArgumentException("unknown preset " + v);
        if (r.TryGetValue("config_lr", out v)) c.LearningRate = double.Parse(v);
        if (r.TryGetValue("group", out v)) c.MinimumParameterGroupSize = long.Parse(v);
        if (r.TryGetValue("local_steps", out v)) c.LocalSteps = int.Parse(v);
        if (r.TryGetValue("auto_sync", out v) && v == "0") c.AutoSyncGradients = false;
        if (r.TryGetValue("accumulation", out v)) c.GradientAccumulationSteps = int.Parse(v);
        if (r.TryGetValue("memory", out v)) c.Memory = v == "cuda" ? MemorySpace.Cuda : MemorySpace.Host;
        return c;
    }

    static void SetOptions(Dictionary<string, string> r, OptimizerOptions o)
    {
        string v;
        if (r.TryGetValue("lr", out v)) o.InitialLearningRate = double.Parse(v);
        if (r.TryGetValue("batch", out v)) o.BatchSize = int.Parse(v);
        if (r.TryGetValue("epochs", out v)) o.MaxIterations = int.Parse(v);
        if (r.TryGetValue("max_steps", out v)) o.MaxSteps = long.Parse(v);
        if (r.TryGetValue("shuffle", out v)) o.ShuffleData = v == "1";
        if (r.TryGetValue("seed", out v)) o.RandomSeed = ulong.Parse(v);
        if (r.TryGetValue("early_stopping", out v)) o.UseEarlyStopping = v == "1";
        if (r.TryGetValue("patience", out v)) o.EarlyStoppingPatience = int.Parse(v);
        if (r.TryGetValue("tolerance", out v)) o.Tolerance = double.Parse(v);
        if (!r.TryGetValue("schedule", out v)) return;
        long? warmup = r.TryGetValue("warmup", out var w) ? long.Parse(w) : (long?)null;
        long? period = r.TryGetValue("decay_period", out var p) ? long.Parse(p) : (long?)null;
        double? minRate = r.TryGetValue("min_lr", out var m) ? double.Parse(m) : (double?)null;
        double? gamma = r.TryGetValue("gamma", out var g) ? double.Parse(g) : (double?)null;
        var s = v == "constant" ? LearningRateSchedule.Constant()
              : v == "warmup" ? LearningRateSchedule.Warmup(warmup.Value)
              : v == "cosine" ? LearningRateSchedule.Cosine(period, minRate)
              : v == "step_decay" ? LearningRateSchedule.StepDecay(period.Value, gamma)
              : v == "warmup_cosine" ? LearningRateSchedule.WarmupCosine(warmup.Value, period, minRate)
              : v == "warmup_step_decay" ? LearningRateSchedule.WarmupStepDecay(warmup.Value, period.Value, gamma)
              : v == "custom" ? LearningRateSchedule.FromFunction((t, b) => b / (1.0 + (double)t / 2.0))
              : throw new ArgumentException("unknown schedule " + v);
        if (r.TryGetValue("per_step", out v)) s.PerStep = v == "1";
        o.LearningRateSchedule = s;
    }

    // One rank of a run: its output text.
    static string RunRank<T>(Dictionary<string, string> r, int rank, int ranks, string environmentId) where T : struct
    {
        using (var backend = new InMemoryCommunicationBackend<T>(rank, ranks, environmentId))
            return TrainRank(r, backend);
    }

    // A launched run: this process is one rank of a job under shardopt-run, on the run's backend from the launcher's
    // environment; rank 0's output, null on the others.
    static string RunLaunched<T>(Dictionary<string, string> r) where T : struct
    {
        string name = r["backend"];
        using (CommunicationBackend<T> backend = name == "staged" ? new StagedCommunicationBackend<T>()
                                               : name == "nccl" ? (CommunicationBackend<T>)new NCCLCommunicationBackend<T>()
                                               : new UcxCommunicationBackend<T>())
        {
            if (backend.WorldSize != int.Parse(r["ranks"]))
                throw new InvalidOperationException($"launched with {backend.WorldSize} ranks, the run has {r["ranks"]}");
            string text = TrainRank(r, backend);
            return backend.Rank == 0 ? text : null;
        }
    }

    static string TrainRank<T>(Dictionary<string, string> r, CommunicationBackend<T> backend) where T : struct
    {
        var (xTrain, yTrain) = ConformanceModel<T>.Rows(0, Train);
        var input = new OptimizationInputData<T, Tensor<double>, Tensor<double>> { XTrain = xTrain, YTrain = yTrain };
        if (r.ContainsKey("validation")) { var (x, y) = ConformanceModel<T>.Rows(Train, Valid); input.XValidation = x; input.YValidation = y; }
        if (r.ContainsKey("test")) { var (x, y) = ConformanceModel<T>.Rows(Train + Valid, Test); input.XTest = x; input.YTest = y; }
        long rows = 0, cols = 0;
        if (r.TryGetValue("matrix", out var shape))
        {
            var rc = shape.Split('x');
            (rows, cols) = (long.Parse(rc[0]), long.Parse(rc[1]));
        }
        var model = new ConformanceModel<T>(rows, cols);
        var options = Options<T>(r["optimizer"]);
        SetOptions(r, options);
        {
            var config = Configuration(r, backend);
            var optimizer = Sharded(r, Base(r["optimizer"], model, options), config);
            try
            {
                if (r.TryGetValue("resume_after", out var k))
                {
                    int epochs = options.MaxIterations;
                    options.MaxIterations = int.Parse(k);
                    optimizer.Optimize(input);
                    byte[] bytes = optimizer.Serialize();
                    optimizer.Dispose();
                    optimizer = Sharded(r, Base(r["optimizer"], model, options), config);
                    options.MaxIterations = epochs;
                    optimizer.Deserialize(bytes);
                }
                var result = optimizer.Optimize(input);
                var final = optimizer.GetParameters();
                return "run " + r["name"] + "\n" + Line("params", final.Select(Double)) + Line("best", result.BestSolution.Select(Double)) +
                       Line("training", result.TrainingLossHistory) + Line("validation", result.ValidationLossHistory) +
                       Line("lr", result.LearningRateHistory) +
                       $"counts {result.Iterations} {result.Steps} {result.BestEpoch} {(result.StoppedEarly ? 1 : 0)}\n" +
                       Line("losses", new[] { result.BestFitnessScore, result.TrainingResult.Loss, result.ValidationResult.Loss, result.TestResult.Loss }) +
                       (optimizer.Memory == MemorySpace.Cuda ? "memory cuda\n" : "");
            }
            finally { optimizer.Dispose(); }
        }
    }

    static bool RunOne(Dictionary<string, string> r)
    {
        int ranks = int.Parse(r["ranks"]);
        bool f32 = r["dtype"] == "f32";
        if (r.ContainsKey("backend"))
        {
            try { Console.Write((f32 ? RunLaunched<float>(r) : RunLaunched<double>(r)) ?? ""); return true; }
            catch (Exception e) { Console.Error.WriteLine($"run {r["name"]}: {e}"); return false; }
        }
        string id = "conformance-" + r["name"] + "-" + Guid.NewGuid();
        var outputs = new string[ranks];
        var errors = new Exception[ranks];
        var threads = Enumerable.Range(0, ranks).Select(k => new Thread(() =>
        {
            try { outputs[k] = f32 ? RunRank<float>(r, k, ranks, id) : RunRank<double>(r, k, ranks, id); }
            catch (Exception e) { errors[k] = e; }
        })).ToList();
        threads.ForEach(t => t.Start());
        threads.ForEach(t => t.Join());
        bool failed = false;
        for (int k = 0; k < ranks; ++k)
        {
            if (errors[k] != null) { Console.Error.WriteLine($"run {r["name"]}: rank {k}: {errors[k]}"); failed = true; }
            else if (outputs[k] != outputs[0]) { Console.Error.WriteLine($"run {r["name"]}: rank {k}'s results differ from rank 0's"); failed = true; }
        }
        if (!failed) Console.Write(outputs[0]);
        return !failed;
    }

    static int Main(string[] args)
    {
        if (args.Length < 1) { Console.Error.WriteLine("usage: conformance_csharp.exe RUNS_FILE [RUN_NAME...]"); return 2; }
        System.Globalization.CultureInfo.DefaultThreadCurrentCulture = System.Globalization.CultureInfo.InvariantCulture;
        Thread.CurrentThread.CurrentCulture = System.Globalization.CultureInfo.InvariantCulture;
        bool failed = false;
        foreach (var line in File.ReadAllLines(args[0]))
        {
            var tokens = line.Split(new[] { ' ', '\t' }, StringSplitOptions.RemoveEmptyEntries);
            if (tokens.Length == 0 || tokens[0].StartsWith("#")) continue;
            if (args.Length > 1 && !args.Skip(1).Contains(tokens[0])) continue;
            var run = tokens.Skip(1).Select(t => t.Split(new[] { '=' }, 2)).ToDictionary(kv => kv[0], kv => kv[1]);
            run["name"] = tokens[0];
            failed |= !RunOne(run);
            Console.Out.Flush();
        }
        return failed ? 1 : 0;
    }
}
