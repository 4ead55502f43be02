// Issue 37 (group "optimizers"): LionOptimizer, AdafactorOptimizer, NadamOptimizer, AdaMaxOptimizer, AdaDeltaOptimizer and
// MuonOptimizer. Their options are the library's presets (torch.optim's defaults), read back through the options; the new
// settings round-trip to their C fields; a bad value is the library's ArgumentException naming the field, and the old value
// stays; Lion, NAdam, AdaMax and AdaDelta train the demo MLP through a sharded optimizer.
using System;
using System.Collections.Generic;
using System.Linq;
using Shardopt.DistributedTraining;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

static partial class ShardoptTests
{
    // Every setting of the options over shardopt_optimizer_options: the property, and its C field.
    static readonly (string, Func<OptimizerOptions, double>, Func<shardopt_optimizer_options, double>)[] OptimizerFields = {
        ("LearningRate", o => o.LearningRate, c => c.lr), ("WeightDecay", o => o.WeightDecay, c => c.weight_decay),
        ("Maximize", o => o.Maximize ? 1 : 0, c => c.maximize), ("Momentum", o => o.Momentum, c => c.momentum),
        ("Dampening", o => o.Dampening, c => c.dampening), ("Nesterov", o => o.Nesterov ? 1 : 0, c => c.nesterov),
        ("Beta1", o => o.Beta1, c => c.beta1), ("Beta2", o => o.Beta2, c => c.beta2), ("Epsilon", o => o.Epsilon, c => c.eps),
        ("AMSGrad", o => o.AMSGrad ? 1 : 0, c => c.amsgrad), ("Decay", o => o.Decay, c => c.alpha), ("Centered", o => o.Centered ? 1 : 0, c => c.centered),
        ("LearningRateDecay", o => o.LearningRateDecay, c => c.lr_decay), ("InitialAccumulatorValue", o => o.InitialAccumulatorValue, c => c.initial_accumulator_value),
        ("StatePrecision", o => (int)o.StatePrecision, c => c.state_precision), ("MomentumDecay", o => o.MomentumDecay, c => c.momentum_decay),
        ("DecoupledWeightDecay", o => o.DecoupledWeightDecay ? 1 : 0, c => c.decoupled_weight_decay), ("Rho", o => o.Rho, c => c.rho),
        ("Beta2Decay", o => o.Beta2Decay, c => c.beta2_decay), ("Epsilon2", o => o.Epsilon2, c => c.eps2), ("ClipThreshold", o => o.ClipThreshold, c => c.clip_threshold),
        ("NewtonSchulzSteps", o => o.NewtonSchulzSteps, c => c.ns_steps), ("NewtonSchulzA", o => o.NewtonSchulzA, c => c.ns_a),
        ("NewtonSchulzB", o => o.NewtonSchulzB, c => c.ns_b), ("NewtonSchulzC", o => o.NewtonSchulzC, c => c.ns_c),
        ("LearningRateAdjustment", o => (int)o.LearningRateAdjustment, c => c.adjust_lr), ("AdamWLearningRate", o => o.AdamWLearningRate, c => c.adamw_lr),
        ("AdamWWeightDecay", o => o.AdamWWeightDecay, c => c.adamw_weight_decay), ("AdamWEpsilon", o => o.AdamWEpsilon, c => c.adamw_eps) };

    static void NewOptionsAreThePresets()
    {
        var classes = new (string, int, int, Func<OptimizerOptions>, Func<Optimizer>)[] {
            ("Lion", SHARDOPT_PRESET_LION, SHARDOPT_LION, () => new LionOptimizerOptions(), () => new LionOptimizer()),
            ("Adafactor", SHARDOPT_PRESET_ADAFACTOR, SHARDOPT_ADAFACTOR, () => new AdafactorOptimizerOptions<float, float[], float[]>(), () => new AdafactorOptimizer()),
            ("Nadam", SHARDOPT_PRESET_NADAM, SHARDOPT_NADAM, () => new NadamOptimizerOptions(), () => new NadamOptimizer()),
            ("AdaMax", SHARDOPT_PRESET_ADAMAX, SHARDOPT_ADAMAX, () => new AdaMaxOptimizerOptions<double, double[][], double[]>(), () => new AdaMaxOptimizer()),
            ("AdaDelta", SHARDOPT_PRESET_ADADELTA, SHARDOPT_ADADELTA, () => new AdaDeltaOptimizerOptions(), () => new AdaDeltaOptimizer()),
            ("Muon", SHARDOPT_PRESET_MUON, SHARDOPT_MUON, () => new MuonOptimizerOptions(), () => new MuonOptimizer()) };
        foreach (var k in classes)
        {
            string name = k.Item1; int preset = k.Item2, kind = k.Item3;
            using (var reference = new shardopt_optimizer_options())
            {
                shardopt_optimizer_options_init_preset(reference, SHARDOPT_SIZEOF_OPTIMIZER_OPTIONS, preset);
                Assert(reference.kind == kind, name + " preset's kind");
                var made = k.Item5();
                Assert(made.GetType().Name == name + "Optimizer" && made.Options.GetType().Name == name + "OptimizerOptions", name + " classes");
                foreach (var o in new[] { k.Item4(), made.Options })
                    foreach (var field in OptimizerFields)
                        Assert(field.Item2(o) == field.Item3(reference), $"{name}: {field.Item1} {field.Item2(o)} != the preset's {field.Item3(reference)}");
            }
        }
        // torch.optim's defaults, as the presets give them
        var lion = new LionOptimizerOptions();
        Assert(lion.LearningRate == 1e-4 && lion.Beta1 == 0.9 && lion.Beta2 == 0.99 && lion.WeightDecay == 0, "lion defaults");
        var f = new AdafactorOptimizerOptions();
        Assert(f.LearningRate == 1e-2 && f.Beta2Decay == -0.8 && f.Epsilon == 0 && f.Epsilon2 == 1e-3 && f.ClipThreshold == 1, "adafactor defaults");
        var na = new NadamOptimizerOptions();
        Assert(na.LearningRate == 2e-3 && na.Beta1 == 0.9 && na.Beta2 == 0.999 && na.Epsilon == 1e-8 && na.MomentumDecay == 4e-3 && !na.DecoupledWeightDecay, "nadam defaults");
        var mx = new AdaMaxOptimizerOptions();
        Assert(mx.LearningRate == 2e-3 && mx.Beta1 == 0.9 && mx.Beta2 == 0.999 && mx.Epsilon == 1e-8, "adamax defaults");
        var d = new AdaDeltaOptimizerOptions();
        Assert(d.LearningRate == 1 && d.Rho == 0.9 && d.Epsilon == 1e-6, "adadelta defaults");
        var m = new MuonOptimizerOptions();
        Assert(m.LearningRate == 1e-3 && m.Momentum == 0.95 && m.Nesterov && m.WeightDecay == 0.1 && m.NewtonSchulzSteps == 5 &&
               m.NewtonSchulzA == 3.4445 && m.NewtonSchulzB == -4.7750 && m.NewtonSchulzC == 2.0315 &&
               m.LearningRateAdjustment == MuonLearningRateAdjustment.Original && m.AdamWLearningRate == 1e-3 && m.AdamWWeightDecay == 1e-2 &&
               m.AdamWEpsilon == 1e-8, "muon defaults");
        foreach (var o in new OptimizerOptions[] { lion, f, na, mx, d, m, new AdamOptimizerOptions() })
            Assert(o.StatePrecision == StatePrecision.Full, "full state by default");
    }

    static void NewSettingsRoundTrip()
    {
        var na = new NadamOptimizerOptions { MomentumDecay = 5e-3, DecoupledWeightDecay = true, WeightDecay = 0.01 };
        Assert(na.MomentumDecay == 5e-3 && na.DecoupledWeightDecay && na.WeightDecay == 0.01, "nadam settings");
        Assert(new AdaDeltaOptimizerOptions { Rho = 0.95 }.Rho == 0.95, "rho");
        var f = new AdafactorOptimizerOptions { Beta2Decay = -0.5, Epsilon2 = 2e-3, ClipThreshold = 1.5, Epsilon = 1e-30 };
        Assert(f.Beta2Decay == -0.5 && f.Epsilon2 == 2e-3 && f.ClipThreshold == 1.5 && f.Epsilon == 1e-30, "adafactor settings");
        var m = new MuonOptimizerOptions { NewtonSchulzSteps = 3, NewtonSchulzA = 2, NewtonSchulzB = -1.5, NewtonSchulzC = 0.5, AdamWLearningRate = 3e-4,
                                           AdamWWeightDecay = 0, AdamWEpsilon = 1e-6, Nesterov = false };
        Assert(m.NewtonSchulzSteps == 3 && m.NewtonSchulzA == 2 && m.NewtonSchulzB == -1.5 && m.NewtonSchulzC == 0.5 && m.AdamWLearningRate == 3e-4 &&
               m.AdamWWeightDecay == 0 && m.AdamWEpsilon == 1e-6 && !m.Nesterov, "muon settings");
        foreach (MuonLearningRateAdjustment a in Enum.GetValues(typeof(MuonLearningRateAdjustment)))
        {
            m.LearningRateAdjustment = a;
            Assert(m.LearningRateAdjustment == a, "adjust_lr " + a);
        }
        var adam = new AdamOptimizerOptions();
        foreach (StatePrecision p in new[] { StatePrecision.Bits8, StatePrecision.Bits4, StatePrecision.Full })
        {
            adam.StatePrecision = p;
            Assert(adam.StatePrecision == p, "state precision " + p);
        }
        Assert(new MomentumOptimizerOptions { StatePrecision = StatePrecision.Bits4 }.StatePrecision == StatePrecision.Bits4, "momentum's low-bit state");
        var lion = new LionOptimizerOptions { Beta1 = 0.95, Beta2 = 0.98 };
        Assert(lion.Beta1 == 0.95 && lion.Beta2 == 0.98, "lion betas");
    }

    static void NewSettingsCheckedByTheLibrary()
    {
        var cases = new (string, Func<OptimizerOptions>, Action<OptimizerOptions>, string)[] {
            ("Beta2", () => new LionOptimizerOptions(), o => o.Beta2 = 1.5, "beta2"),
            ("MomentumDecay", () => new NadamOptimizerOptions(), o => o.MomentumDecay = -1, "momentum_decay"),
            ("Beta1", () => new AdaMaxOptimizerOptions(), o => o.Beta1 = 1, "beta1"),
            ("Rho", () => new AdaDeltaOptimizerOptions(), o => o.Rho = 1.5, "rho"),
            ("Beta2Decay", () => new AdafactorOptimizerOptions(), o => o.Beta2Decay = 0.5, "beta2_decay"),
            ("Epsilon2", () => new AdafactorOptimizerOptions(), o => o.Epsilon2 = -1, "eps2"),
            ("ClipThreshold", () => new AdafactorOptimizerOptions(), o => o.ClipThreshold = 0.5, "clip_threshold"),
            ("NewtonSchulzSteps", () => new MuonOptimizerOptions(), o => o.NewtonSchulzSteps = 100, "ns_steps"),
            ("NewtonSchulzB", () => new MuonOptimizerOptions(), o => o.NewtonSchulzB = double.PositiveInfinity, "ns_b"),
            ("LearningRateAdjustment", () => new MuonOptimizerOptions(), o => o.LearningRateAdjustment = (MuonLearningRateAdjustment)7, "adjust_lr"),
            ("AdamWLearningRate", () => new MuonOptimizerOptions(), o => o.AdamWLearningRate = -1, "adamw_lr"),
            ("AdamWWeightDecay", () => new MuonOptimizerOptions(), o => o.AdamWWeightDecay = -0.1, "adamw_weight_decay"),
            ("AdamWEpsilon", () => new MuonOptimizerOptions(), o => o.AdamWEpsilon = double.NaN, "adamw_eps"),
            ("StatePrecision", () => new LionOptimizerOptions(), o => o.StatePrecision = StatePrecision.Bits8, "state_precision"), // Adam, AdamW, SGD only
            ("StatePrecision", () => new AdamOptimizerOptions(), o => o.StatePrecision = (StatePrecision)3, "state_precision"),
            ("DecoupledWeightDecay", () => new AdamOptimizerOptions(), o => o.DecoupledWeightDecay = true, "decoupled_weight_decay") }; // NAdam's only
        foreach (var k in cases)
        {
            string setting = k.Item1, field = k.Item4;
            var o = k.Item2();
            var before = OptimizerFields.First(f => f.Item1 == setting).Item2(o);
            var e = Throws<ArgumentException>(() => k.Item3(o));
            Assert(e is IShardoptException x && x.StatusCode == SHARDOPT_ERR_INVALID_ARGUMENT && e.Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT: ") &&
                   e.Message.Contains(field), $"{setting}: {e.Message}");
            var after = OptimizerFields.First(f => f.Item1 == setting).Item2(o);
            Assert(after.Equals(before), $"{setting}: the old value stays ({after} != {before})");
        }
    }

    // Lion, NAdam, AdaMax and AdaDelta under DDP, ZeRO-1, ZeRO-2 and FSDP on 2 ranks: the ranks agree, the loss falls.
    static void NewOptimizersTrain()
    {
        var runs = new (string, Func<Optimizer>, string)[] {
            ("Lion", () => new LionOptimizer(Plain(new LionOptimizerOptions { LearningRate = 3e-3 }, 128, 4)), "ddp"),
            ("Nadam", () => new NadamOptimizer(Plain(new NadamOptimizerOptions(), 128, 4)), "zero1"),
            ("AdaMax", () => new AdaMaxOptimizer(Plain(new AdaMaxOptimizerOptions(), 128, 4)), "zero2"),
            ("AdaDelta", () => new AdaDeltaOptimizer(Plain(new AdaDeltaOptimizerOptions(), 128, 4)), "fsdp") };
        double start = Model.Evaluate(Model.InitialParameters(), new float[Model.Layout().ElementCount], Enumerable.Range(0, Model.Samples).Select(i => (long)i).ToArray());
        foreach (var k in runs)
        {
            string name = k.Item1, strategy = k.Item3;
            var make = k.Item2;
            var results = Ranks(2, b =>
            {
                var cfg = new ShardingConfiguration(b);
                var wrapped = make();
                ShardedOptimizer opt = strategy == "ddp" ? new DDPOptimizer(wrapped, cfg) : strategy == "zero1" ? new ZeRO1Optimizer(wrapped, cfg)
                    : strategy == "zero2" ? (ShardedOptimizer)new ZeRO2Optimizer(wrapped, cfg) : new FSDPOptimizer(wrapped, cfg);
                using (opt)
                {
                    opt.Initialize(Model.Layout(), Model.InitialParameters());
                    var r = opt.Optimize(Model.Evaluate, new OptimizationInputData { NumSamples = Model.Samples });
                    return (r, opt.GetParameters());
                }
            });
            var r0 = results[0].Item1; var p0 = results[0].Item2;
            Assert(p0.SequenceEqual(results[1].Item2), name + ": the ranks agree");
            Assert(r0.Steps == 16 && r0.Iterations == 4, $"{name}: {r0.Steps} steps, {r0.Iterations} epochs");
            var h = r0.FitnessHistory;
            for (int i = 1; i < h.Length; ++i) Assert(h[i] < h[i - 1], $"{name}: the loss falls every epoch ({string.Join(", ", h)})");
            double end = Model.Evaluate(p0, new float[p0.Length], Enumerable.Range(0, Model.Samples).Select(i => (long)i).ToArray());
            Assert(end < 0.9 * start, $"{name}: loss {start} -> {end}");
            Console.WriteLine($"  {name} ({strategy}): loss {start:F4} -> {end:F4}");
        }
    }

    static (string, Action)[] OptimizersGroup() => new (string, Action)[] {
        ("NewOptionsAreThePresets", NewOptionsAreThePresets), ("NewSettingsRoundTrip", NewSettingsRoundTrip),
        ("NewSettingsCheckedByTheLibrary", NewSettingsCheckedByTheLibrary), ("NewOptimizersTrain", NewOptimizersTrain) };
}
