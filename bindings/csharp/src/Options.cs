// Base optimizers and their options (AiDotNet's XxxOptimizer and XxxOptimizerOptions), and the learning-rate
// schedules: thin wrappers over the C ABI's structs. Every default and every check is the library's.
using System;
using System.Runtime.InteropServices;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>How Adam, AdamW and SGD with momentum keep their state (the C ABI's shardopt_state_precision): Full, or
    /// blockwise quantized Bits8 / Bits4 (docs/optimizers.md; not with AMSGrad).</summary>
    public enum StatePrecision { Full = 0, Bits8 = 1, Bits4 = 2 }

    /// <summary>Muon's learning-rate scale for a rows x cols matrix (the C ABI's shardopt_muon_lr_adjust, torch.optim.Muon's
    /// adjust_lr_fn): Original sqrt(max(1, rows / cols)), MatchRmsAdamW 0.2 sqrt(max(rows, cols)), SpectralUnclamped
    /// sqrt(rows / cols).</summary>
    public enum MuonLearningRateAdjustment { Original = 0, MatchRmsAdamW = 1, SpectralUnclamped = 2 }

    /// <summary>Options of a base optimizer and of the training Optimize runs, over two C structs: the optimizer's
    /// (shardopt_optimizer_options_init_preset: the defaults of AiDotNet's class) and the training's
    /// (shardopt_training_options_init: AiDotNet's MaxIterations 100, BatchSize 32, ShuffleData, UseEarlyStopping,
    /// EarlyStoppingPatience 10, Tolerance 1e-6). A setter has the library check the value at once: a bad one is an
    /// ArgumentException naming the field, and the old value stays. InitialLearningRate (AiDotNet's name; LearningRate,
    /// torch's) is the base of LearningRateSchedule (null: constant); Decay is RMSprop's (torch's alpha). BatchSize: samples
    /// per step over all ranks (0: the whole set); MaxIterations: epochs; MaxSteps: steps over all epochs (0: no limit);
    /// ShuffleData: a fresh order each epoch from (RandomSeed, epoch), the same on every rank. UseEarlyStopping stops once
    /// EarlyStoppingPatience epochs in a row have not lowered the score (the validation loss when there is validation data,
    /// else the training loss) by more than Tolerance: the library's rule, voted across ranks.</summary>
    public class OptimizerOptions
    {
        internal readonly shardopt_optimizer_options Native;
        internal readonly shardopt_training_options Training;
        protected OptimizerOptions(int preset)
        {
            Errors.LoadNative();
            shardopt_optimizer_options_init_preset(Native = new shardopt_optimizer_options(), SHARDOPT_SIZEOF_OPTIMIZER_OPTIONS, preset);
            shardopt_training_options_init(Training = new shardopt_training_options());
        }
        void Opt<V>(V old, V value, Action<V> set) { set(value); try { shardopt_optimizer_options_validate(Native); } catch { set(old); throw; } }
        void Train<V>(V old, V value, Action<V> set) { set(value); try { shardopt_training_options_validate(Training); } catch { set(old); throw; } }
        public double InitialLearningRate { get => Native.lr; set => Opt(Native.lr, value, v => Native.lr = v); }
        public double LearningRate { get => InitialLearningRate; set => InitialLearningRate = value; }
        public double WeightDecay { get => Native.weight_decay; set => Opt(Native.weight_decay, value, v => Native.weight_decay = v); }
        public bool Maximize { get => Native.maximize != 0; set => Opt(Native.maximize, value ? 1 : 0, v => Native.maximize = v); }
        public double Momentum { get => Native.momentum; set => Opt(Native.momentum, value, v => Native.momentum = v); }
        public double Dampening { get => Native.dampening; set => Opt(Native.dampening, value, v => Native.dampening = v); }
        public bool Nesterov { get => Native.nesterov != 0; set => Opt(Native.nesterov, value ? 1 : 0, v => Native.nesterov = v); }
        public double Beta1 { get => Native.beta1; set => Opt(Native.beta1, value, v => Native.beta1 = v); }
        public double Beta2 { get => Native.beta2; set => Opt(Native.beta2, value, v => Native.beta2 = v); }
        public double Epsilon { get => Native.eps; set => Opt(Native.eps, value, v => Native.eps = v); }
        public bool AMSGrad { get => Native.amsgrad != 0; set => Opt(Native.amsgrad, value ? 1 : 0, v => Native.amsgrad = v); }
        public double Decay { get => Native.alpha; set => Opt(Native.alpha, value, v => Native.alpha = v); }
        public bool Centered { get => Native.centered != 0; set => Opt(Native.centered, value ? 1 : 0, v => Native.centered = v); }
        public double LearningRateDecay { get => Native.lr_decay; set => Opt(Native.lr_decay, value, v => Native.lr_decay = v); }
        public double InitialAccumulatorValue { get => Native.initial_accumulator_value; set => Opt(Native.initial_accumulator_value, value, v => Native.initial_accumulator_value = v); }
        /// <summary>Adam, AdamW, SGD with momentum: full or low-bit state (the library checks the rule takes it).</summary>
        public StatePrecision StatePrecision { get => (StatePrecision)Native.state_precision; set => Opt(Native.state_precision, (int)value, v => Native.state_precision = v); }
        /// <summary>NAdam's momentum decay (psi) and its AdamW-style weight decay instead of L2.</summary>
        public double MomentumDecay { get => Native.momentum_decay; set => Opt(Native.momentum_decay, value, v => Native.momentum_decay = v); }
        public bool DecoupledWeightDecay { get => Native.decoupled_weight_decay != 0; set => Opt(Native.decoupled_weight_decay, value ? 1 : 0, v => Native.decoupled_weight_decay = v); }
        /// <summary>Adadelta's decay of its running averages.</summary>
        public double Rho { get => Native.rho; set => Opt(Native.rho, value, v => Native.rho = v); }
        /// <summary>Adafactor: the second moment's decay rate is t^Beta2Decay; Epsilon2 is its eps2 (Epsilon its eps1, 0: the
        /// element type's machine epsilon); ClipThreshold the update's RMS clipping threshold (torch's d).</summary>
        public double Beta2Decay { get => Native.beta2_decay; set => Opt(Native.beta2_decay, value, v => Native.beta2_decay = v); }
        public double Epsilon2 { get => Native.eps2; set => Opt(Native.eps2, value, v => Native.eps2 = v); }
        public double ClipThreshold { get => Native.clip_threshold; set => Opt(Native.clip_threshold, value, v => Native.clip_threshold = v); }
        /// <summary>Muon on matrices: Newton-Schulz iterations and the quintic's coefficients a, b, c; the learning-rate
        /// adjustment; AdamW's learning rate, weight decay and epsilon on every other tensor.</summary>
        public int NewtonSchulzSteps { get => Native.ns_steps; set => Opt(Native.ns_steps, value, v => Native.ns_steps = v); }
        public double NewtonSchulzA { get => Native.ns_a; set => Opt(Native.ns_a, value, v => Native.ns_a = v); }
        public double NewtonSchulzB { get => Native.ns_b; set => Opt(Native.ns_b, value, v => Native.ns_b = v); }
        public double NewtonSchulzC { get => Native.ns_c; set => Opt(Native.ns_c, value, v => Native.ns_c = v); }
        public MuonLearningRateAdjustment LearningRateAdjustment { get => (MuonLearningRateAdjustment)Native.adjust_lr; set => Opt(Native.adjust_lr, (int)value, v => Native.adjust_lr = v); }
        public double AdamWLearningRate { get => Native.adamw_lr; set => Opt(Native.adamw_lr, value, v => Native.adamw_lr = v); }
        public double AdamWWeightDecay { get => Native.adamw_weight_decay; set => Opt(Native.adamw_weight_decay, value, v => Native.adamw_weight_decay = v); }
        public double AdamWEpsilon { get => Native.adamw_eps; set => Opt(Native.adamw_eps, value, v => Native.adamw_eps = v); }
        public int BatchSize { get => (int)Training.batch_size; set => Train(Training.batch_size, value, v => Training.batch_size = v); }
        public int MaxIterations { get => Training.max_epochs; set => Train(Training.max_epochs, value, v => Training.max_epochs = v); }
        public long MaxSteps { get => Training.max_steps; set => Train(Training.max_steps, value, v => Training.max_steps = v); }
        public bool ShuffleData { get => Training.shuffle != 0; set => Train(Training.shuffle, value ? 1 : 0, v => Training.shuffle = v); }
        public ulong RandomSeed { get => Training.seed; set => Train(Training.seed, value, v => Training.seed = v); }
        public bool UseEarlyStopping { get => Training.early_stopping != 0; set => Train(Training.early_stopping, value ? 1 : 0, v => Training.early_stopping = v); }
        public int EarlyStoppingPatience { get => Training.patience; set => Train(Training.patience, value, v => Training.patience = v); }
        public double Tolerance { get => Training.tolerance; set => Train(Training.tolerance, value, v => Training.tolerance = v); }
        /// <summary>The model on the GPU (device_batches): Optimize hands the model device views of an optimizer in CUDA memory
        /// instead of host copies; OptimizeOnDevice sets it for its call.</summary>
        public bool DeviceBatches { get => Training.device_batches != 0; set => Train(Training.device_batches, value ? 1 : 0, v => Training.device_batches = v); }
        public LearningRateSchedule LearningRateSchedule { get; set; }
    }

    public class StochasticGradientDescentOptimizerOptions : OptimizerOptions { public StochasticGradientDescentOptimizerOptions() : base(SHARDOPT_PRESET_SGD) { } }
    public class MomentumOptimizerOptions : OptimizerOptions { public MomentumOptimizerOptions() : base(SHARDOPT_PRESET_MOMENTUM) { } }
    public class AdamOptimizerOptions : OptimizerOptions { public AdamOptimizerOptions() : base(SHARDOPT_PRESET_ADAM) { } }
    public class AdamWOptimizerOptions : OptimizerOptions { public AdamWOptimizerOptions() : base(SHARDOPT_PRESET_ADAMW) { } }
    public class RootMeanSquarePropagationOptimizerOptions : OptimizerOptions { public RootMeanSquarePropagationOptimizerOptions() : base(SHARDOPT_PRESET_RMSPROP) { } }
    public class AdagradOptimizerOptions : OptimizerOptions { public AdagradOptimizerOptions() : base(SHARDOPT_PRESET_ADAGRAD) { } }
    public class LambOptimizerOptions : OptimizerOptions { public LambOptimizerOptions() : base(SHARDOPT_PRESET_LAMB) { } }
    public class LionOptimizerOptions : OptimizerOptions { public LionOptimizerOptions() : base(SHARDOPT_PRESET_LION) { } }
    public class AdafactorOptimizerOptions : OptimizerOptions { public AdafactorOptimizerOptions() : base(SHARDOPT_PRESET_ADAFACTOR) { } }
    public class NadamOptimizerOptions : OptimizerOptions { public NadamOptimizerOptions() : base(SHARDOPT_PRESET_NADAM) { } }
    public class AdaMaxOptimizerOptions : OptimizerOptions { public AdaMaxOptimizerOptions() : base(SHARDOPT_PRESET_ADAMAX) { } }
    public class AdaDeltaOptimizerOptions : OptimizerOptions { public AdaDeltaOptimizerOptions() : base(SHARDOPT_PRESET_ADADELTA) { } }
    public class MuonOptimizerOptions : OptimizerOptions { public MuonOptimizerOptions() : base(SHARDOPT_PRESET_MUON) { } }
    public class StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> : StochasticGradientDescentOptimizerOptions where T : struct { }
    public class MomentumOptimizerOptions<T, TInput, TOutput> : MomentumOptimizerOptions where T : struct { }
    public class AdamOptimizerOptions<T, TInput, TOutput> : AdamOptimizerOptions where T : struct { }
    public class AdamWOptimizerOptions<T, TInput, TOutput> : AdamWOptimizerOptions where T : struct { }
    public class RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> : RootMeanSquarePropagationOptimizerOptions where T : struct { }
    public class AdagradOptimizerOptions<T, TInput, TOutput> : AdagradOptimizerOptions where T : struct { }
    public class LambOptimizerOptions<T, TInput, TOutput> : LambOptimizerOptions where T : struct { }
    public class LionOptimizerOptions<T, TInput, TOutput> : LionOptimizerOptions where T : struct { }
    public class AdafactorOptimizerOptions<T, TInput, TOutput> : AdafactorOptimizerOptions where T : struct { }
    public class NadamOptimizerOptions<T, TInput, TOutput> : NadamOptimizerOptions where T : struct { }
    public class AdaMaxOptimizerOptions<T, TInput, TOutput> : AdaMaxOptimizerOptions where T : struct { }
    public class AdaDeltaOptimizerOptions<T, TInput, TOutput> : AdaDeltaOptimizerOptions where T : struct { }
    public class MuonOptimizerOptions<T, TInput, TOutput> : MuonOptimizerOptions where T : struct { }

    /// <summary>A base optimizer (AiDotNet's IOptimizer): its options, wrapped by a sharded optimizer.</summary>
    public abstract class Optimizer
    {
        protected Optimizer(OptimizerOptions options) { Options = options ?? throw new ArgumentNullException(nameof(options)); }
        public OptimizerOptions Options { get; }
        public OptimizerOptions GetOptions() => Options;
        internal virtual void InitializeFromModel(ShardedOptimizer optimizer) { }
    }

    /// <summary>A base optimizer that carries the model Optimize(OptimizationInputData) trains (AiDotNet's generic optimizer
    /// classes): its layout and parameters create the sharded optimizer on its first collective call.</summary>
    public interface IModelOptimizer<T, TInput, TOutput> where T : struct { IGradientModel<T, TInput, TOutput> Model { get; } }
    public abstract class ModelOptimizer<T, TInput, TOutput> : Optimizer, IModelOptimizer<T, TInput, TOutput> where T : struct
    {
        protected ModelOptimizer(IGradientModel<T, TInput, TOutput> model, OptimizerOptions options) : base(options) { Elem<T>.Check(); Model = model ?? throw new ArgumentNullException(nameof(model)); }
        public IGradientModel<T, TInput, TOutput> Model { get; }
        internal override void InitializeFromModel(ShardedOptimizer optimizer) => optimizer.InitializeT(Model.GetParameterLayout(), Model.GetParameters(), null);
    }

    public class StochasticGradientDescentOptimizer : Optimizer { public StochasticGradientDescentOptimizer(StochasticGradientDescentOptimizerOptions options = null) : base(options ?? new StochasticGradientDescentOptimizerOptions()) { } }
    public class MomentumOptimizer : Optimizer { public MomentumOptimizer(MomentumOptimizerOptions options = null) : base(options ?? new MomentumOptimizerOptions()) { } }
    public class AdamOptimizer : Optimizer { public AdamOptimizer(AdamOptimizerOptions options = null) : base(options ?? new AdamOptimizerOptions()) { } }
    public class AdamWOptimizer : Optimizer { public AdamWOptimizer(AdamWOptimizerOptions options = null) : base(options ?? new AdamWOptimizerOptions()) { } }
    public class RootMeanSquarePropagationOptimizer : Optimizer { public RootMeanSquarePropagationOptimizer(RootMeanSquarePropagationOptimizerOptions options = null) : base(options ?? new RootMeanSquarePropagationOptimizerOptions()) { } }
    public class AdagradOptimizer : Optimizer { public AdagradOptimizer(AdagradOptimizerOptions options = null) : base(options ?? new AdagradOptimizerOptions()) { } }
    public class LambOptimizer : Optimizer { public LambOptimizer(LambOptimizerOptions options = null) : base(options ?? new LambOptimizerOptions()) { } }
    public class LionOptimizer : Optimizer { public LionOptimizer(LionOptimizerOptions options = null) : base(options ?? new LionOptimizerOptions()) { } }
    public class AdafactorOptimizer : Optimizer { public AdafactorOptimizer(AdafactorOptimizerOptions options = null) : base(options ?? new AdafactorOptimizerOptions()) { } }
    public class NadamOptimizer : Optimizer { public NadamOptimizer(NadamOptimizerOptions options = null) : base(options ?? new NadamOptimizerOptions()) { } }
    public class AdaMaxOptimizer : Optimizer { public AdaMaxOptimizer(AdaMaxOptimizerOptions options = null) : base(options ?? new AdaMaxOptimizerOptions()) { } }
    public class AdaDeltaOptimizer : Optimizer { public AdaDeltaOptimizer(AdaDeltaOptimizerOptions options = null) : base(options ?? new AdaDeltaOptimizerOptions()) { } }
    public class MuonOptimizer : Optimizer { public MuonOptimizer(MuonOptimizerOptions options = null) : base(options ?? new MuonOptimizerOptions()) { } }
    public class StochasticGradientDescentOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public StochasticGradientDescentOptimizer(IGradientModel<T, TInput, TOutput> model, StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new StochasticGradientDescentOptimizerOptions<T, TInput, TOutput>()) { } }
    public class MomentumOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public MomentumOptimizer(IGradientModel<T, TInput, TOutput> model, MomentumOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new MomentumOptimizerOptions<T, TInput, TOutput>()) { } }
    public class AdamOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public AdamOptimizer(IGradientModel<T, TInput, TOutput> model, AdamOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new AdamOptimizerOptions<T, TInput, TOutput>()) { } }
    public class AdamWOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public AdamWOptimizer(IGradientModel<T, TInput, TOutput> model, AdamWOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new AdamWOptimizerOptions<T, TInput, TOutput>()) { } }
    public class RootMeanSquarePropagationOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public RootMeanSquarePropagationOptimizer(IGradientModel<T, TInput, TOutput> model, RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput>()) { } }
    public class AdagradOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public AdagradOptimizer(IGradientModel<T, TInput, TOutput> model, AdagradOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new AdagradOptimizerOptions<T, TInput, TOutput>()) { } }
    public class LambOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public LambOptimizer(IGradientModel<T, TInput, TOutput> model, LambOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new LambOptimizerOptions<T, TInput, TOutput>()) { } }
    public class LionOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public LionOptimizer(IGradientModel<T, TInput, TOutput> model, LionOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new LionOptimizerOptions<T, TInput, TOutput>()) { } }
    public class AdafactorOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public AdafactorOptimizer(IGradientModel<T, TInput, TOutput> model, AdafactorOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new AdafactorOptimizerOptions<T, TInput, TOutput>()) { } }
    public class NadamOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public NadamOptimizer(IGradientModel<T, TInput, TOutput> model, NadamOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new NadamOptimizerOptions<T, TInput, TOutput>()) { } }
    public class AdaMaxOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public AdaMaxOptimizer(IGradientModel<T, TInput, TOutput> model, AdaMaxOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new AdaMaxOptimizerOptions<T, TInput, TOutput>()) { } }
    public class AdaDeltaOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public AdaDeltaOptimizer(IGradientModel<T, TInput, TOutput> model, AdaDeltaOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new AdaDeltaOptimizerOptions<T, TInput, TOutput>()) { } }
    public class MuonOptimizer<T, TInput, TOutput> : ModelOptimizer<T, TInput, TOutput> where T : struct
    { public MuonOptimizer(IGradientModel<T, TInput, TOutput> model, MuonOptimizerOptions<T, TInput, TOutput> options = null) : base(model, options ?? new MuonOptimizerOptions<T, TInput, TOutput>()) { } }

    /// <summary>The learning-rate schedules of the C ABI (their formulas are shardopt.h's): linear warm-up over `warmup` epochs
    /// (steps with PerStep); cosine annealing to minRate over `period` (null: to the end of training); the rate times gamma
    /// every `period`; the two after a warm-up; or a function rate(t, baseRate). The base is the optimizer's rate when Optimize
    /// starts. A parameter left out (null) is the library's default; the library checks a factory's arguments at once. Rate
    /// gives the rate at t as Optimize applies it (shardopt_training_learning_rate).</summary>
    public sealed class LearningRateSchedule
    {
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int LrFn(IntPtr user, long t, double baseRate, out double lr);
        readonly int kind;
        readonly long? warmup, period;
        readonly double? minRate, gamma;
        readonly LrFn custom; // the library calls it while the options use it
        LearningRateSchedule(int kind, long? warmup = null, long? period = null, double? minRate = null, double? gamma = null, Func<long, double, double> rate = null)
        {
            Errors.LoadNative();
            this.kind = kind; this.warmup = warmup; this.period = period; this.minRate = minRate; this.gamma = gamma;
            if (rate != null) custom = (IntPtr user, long t, double b, out double lr) => { double r = 0; int rc = Callbacks.Guard(() => r = rate(t, b)); lr = r; return rc; };
            using (var o = new shardopt_training_options()) { shardopt_training_options_init(o); Apply(o); shardopt_training_options_validate(o); }
        }
        public bool PerStep { get; set; }
        public static LearningRateSchedule Constant() => new LearningRateSchedule(SHARDOPT_LR_CONSTANT);
        public static LearningRateSchedule Warmup(long warmup) => new LearningRateSchedule(SHARDOPT_LR_WARMUP, warmup);
        public static LearningRateSchedule Cosine(long? period = null, double? minRate = null) => new LearningRateSchedule(SHARDOPT_LR_COSINE, null, period, minRate);
        public static LearningRateSchedule StepDecay(long period, double? gamma = null) => new LearningRateSchedule(SHARDOPT_LR_STEP_DECAY, null, period, null, gamma);
        public static LearningRateSchedule WarmupCosine(long warmup, long? period = null, double? minRate = null) => new LearningRateSchedule(SHARDOPT_LR_WARMUP_COSINE, warmup, period, minRate);
        public static LearningRateSchedule WarmupStepDecay(long warmup, long period, double? gamma = null) => new LearningRateSchedule(SHARDOPT_LR_WARMUP_STEP_DECAY, warmup, period, null, gamma);
        public static LearningRateSchedule FromFunction(Func<long, double, double> rate) => new LearningRateSchedule(SHARDOPT_LR_CUSTOM, rate: rate ?? throw new ArgumentNullException(nameof(rate)));
        public double Rate(long t, double baseRate)
        {
            double lr = 0;
            using (var o = new shardopt_training_options()) { shardopt_training_options_init(o); o.num_samples = 1; Apply(o); Callbacks.Call(() => shardopt_training_learning_rate(o, t, baseRate, out lr)); }
            return lr;
        }
        // Sets the schedule's fields of the training options; returns what must stay alive while they are used.
        internal object Apply(shardopt_training_options o)
        {
            o.lr_schedule = kind;
            o.lr_per_step = PerStep ? 1 : 0;
            if (warmup.HasValue) o.warmup = warmup.Value;
            if (period.HasValue) o.decay_period = period.Value;
            if (minRate.HasValue) o.min_lr = minRate.Value;
            if (gamma.HasValue) o.gamma = gamma.Value;
            if (custom != null) o.lr_fn = Marshal.GetFunctionPointerForDelegate(custom);
            return custom;
        }
    }
}
