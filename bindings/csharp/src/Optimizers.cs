using System;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>Options of a base optimizer; defaults are the library's (torch.optim's) for its kind.</summary>
    public class OptimizerOptions
    {
        internal readonly shardopt_optimizer_options Native = new shardopt_optimizer_options();

        protected OptimizerOptions(int kind) { NativeInit.Ensure(); shardopt_native.so_optimizer_options_defaults(Native, kind); }

        public double LearningRate { get => Native.lr; set => Native.lr = value; }
        public double WeightDecay { get => Native.weight_decay; set => Native.weight_decay = value; }
        public bool Maximize { get => Native.maximize != 0; set => Native.maximize = value ? 1 : 0; }
        public double Momentum { get => Native.momentum; set => Native.momentum = value; }
        public double Dampening { get => Native.dampening; set => Native.dampening = value; }
        public bool Nesterov { get => Native.nesterov != 0; set => Native.nesterov = value ? 1 : 0; }
        public double Beta1 { get => Native.beta1; set => Native.beta1 = value; }
        public double Beta2 { get => Native.beta2; set => Native.beta2 = value; }
        public double Epsilon { get => Native.eps; set => Native.eps = value; }
        public bool AMSGrad { get => Native.amsgrad != 0; set => Native.amsgrad = value ? 1 : 0; }
        /// <summary>RMSprop's smoothing constant (torch's alpha).</summary>
        public double Decay { get => Native.alpha; set => Native.alpha = value; }
        public bool Centered { get => Native.centered != 0; set => Native.centered = value ? 1 : 0; }
        public double LearningRateDecay { get => Native.lr_decay; set => Native.lr_decay = value; }
        public double InitialAccumulatorValue { get => Native.initial_accumulator_value; set => Native.initial_accumulator_value = value; }

        // The training loop of Optimize(OptimizationInputData<T, TInput, TOutput>), named as AiDotNet's options.
        /// <summary>Samples per global step (over all ranks); 0 = the whole training set. AiDotNet's default 32.</summary>
        public int BatchSize { get; set; } = 32;
        /// <summary>Epochs (passes over XTrain), as AiDotNet's MaxIterations of gradient optimizers; default 100.</summary>
        public int MaxIterations { get; set; } = 100;
        /// <summary>AiDotNet's early stopping: stop once the score (validation loss when XValidation is given, else
        /// the epoch's training loss) has not improved by more than Tolerance for EarlyStoppingPatience epochs.</summary>
        public bool UseEarlyStopping { get; set; } = true;
        public int EarlyStoppingPatience { get; set; } = 10;
        public double Tolerance { get; set; } = 1e-6;
        /// <summary>A fresh order of the training samples each epoch, the same on every rank (a distributed
        /// sampler), drawn from (RandomSeed, epoch).</summary>
        public bool ShuffleData { get; set; } = true;
        public ulong RandomSeed { get; set; }

        internal shardopt_optimizer_options Copy()
        {
            var c = new shardopt_optimizer_options();
            shardopt_native.so_optimizer_options_defaults(c, Native.kind);
            c.lr = Native.lr; c.weight_decay = Native.weight_decay; c.maximize = Native.maximize; c.momentum = Native.momentum;
            c.dampening = Native.dampening; c.nesterov = Native.nesterov; c.beta1 = Native.beta1; c.beta2 = Native.beta2;
            c.eps = Native.eps; c.amsgrad = Native.amsgrad; c.alpha = Native.alpha; c.centered = Native.centered;
            c.lr_decay = Native.lr_decay; c.initial_accumulator_value = Native.initial_accumulator_value;
            return c;
        }
    }

    public class StochasticGradientDescentOptimizerOptions : OptimizerOptions { public StochasticGradientDescentOptimizerOptions() : base(shardopt_native.SHARDOPT_SGD) { } }
    /// <summary>SGD with momentum 0.9 (AiDotNet's MomentumOptimizer default).</summary>
    public class MomentumOptimizerOptions : OptimizerOptions { public MomentumOptimizerOptions() : base(shardopt_native.SHARDOPT_SGD) { Momentum = 0.9; } }
    public class AdamOptimizerOptions : OptimizerOptions { public AdamOptimizerOptions() : base(shardopt_native.SHARDOPT_ADAM) { } }
    public class AdamWOptimizerOptions : OptimizerOptions { public AdamWOptimizerOptions() : base(shardopt_native.SHARDOPT_ADAMW) { } }
    public class RootMeanSquarePropagationOptimizerOptions : OptimizerOptions { public RootMeanSquarePropagationOptimizerOptions() : base(shardopt_native.SHARDOPT_RMSPROP) { } }
    public sealed class AdagradOptimizerOptions : OptimizerOptions { public AdagradOptimizerOptions() : base(shardopt_native.SHARDOPT_ADAGRAD) { } }
    public sealed class LambOptimizerOptions : OptimizerOptions { public LambOptimizerOptions() : base(shardopt_native.SHARDOPT_LAMB) { } }

    /// <summary>A base optimizer (AiDotNet's IOptimizer): its options, wrapped by a sharded optimizer.</summary>
    public abstract class Optimizer
    {
        protected Optimizer(OptimizerOptions options) { Options = options ?? throw new ArgumentNullException(nameof(options)); }
        public OptimizerOptions Options { get; }
        public OptimizerOptions GetOptions() => Options;
    }

    public class StochasticGradientDescentOptimizer : Optimizer { public StochasticGradientDescentOptimizer(StochasticGradientDescentOptimizerOptions o = null) : base(o ?? new StochasticGradientDescentOptimizerOptions()) { } }
    public class MomentumOptimizer : Optimizer { public MomentumOptimizer(MomentumOptimizerOptions o = null) : base(o ?? new MomentumOptimizerOptions()) { } }
    public class AdamOptimizer : Optimizer { public AdamOptimizer(AdamOptimizerOptions o = null) : base(o ?? new AdamOptimizerOptions()) { } }
    public class AdamWOptimizer : Optimizer { public AdamWOptimizer(AdamWOptimizerOptions o = null) : base(o ?? new AdamWOptimizerOptions()) { } }
    public class RootMeanSquarePropagationOptimizer : Optimizer { public RootMeanSquarePropagationOptimizer(RootMeanSquarePropagationOptimizerOptions o = null) : base(o ?? new RootMeanSquarePropagationOptimizerOptions()) { } }
    public sealed class AdagradOptimizer : Optimizer { public AdagradOptimizer(AdagradOptimizerOptions o = null) : base(o ?? new AdagradOptimizerOptions()) { } }
    public sealed class LambOptimizer : Optimizer { public LambOptimizer(LambOptimizerOptions o = null) : base(o ?? new LambOptimizerOptions()) { } }

    // ---- AiDotNet's generic forms: the base optimizer is built with the model and its options ----

    /// <summary>A base optimizer that carries the model Optimize(OptimizationInputData) trains.</summary>
    public interface IModelOptimizer<T, TInput, TOutput> where T : struct
    {
        IGradientModel<T, TInput, TOutput> Model { get; }
    }

    public class AdamOptimizerOptions<T, TInput, TOutput> : AdamOptimizerOptions where T : struct { }
    public class AdamWOptimizerOptions<T, TInput, TOutput> : AdamWOptimizerOptions where T : struct { }
    public class StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> : StochasticGradientDescentOptimizerOptions where T : struct { }
    public class MomentumOptimizerOptions<T, TInput, TOutput> : MomentumOptimizerOptions where T : struct { }
    public class RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> : RootMeanSquarePropagationOptimizerOptions where T : struct { }

    internal static class ModelCheck
    {
        internal static M NotNull<M>(M model) where M : class
        {
            if (model == null) throw new ArgumentNullException("model");
            return model;
        }
    }

    public class AdamOptimizer<T, TInput, TOutput> : AdamOptimizer, IModelOptimizer<T, TInput, TOutput> where T : struct
    {
        public AdamOptimizer(IGradientModel<T, TInput, TOutput> model, AdamOptimizerOptions<T, TInput, TOutput> options = null)
            : base(options ?? new AdamOptimizerOptions<T, TInput, TOutput>()) { Elem<T>.Check(); Model = ModelCheck.NotNull(model); }
        public IGradientModel<T, TInput, TOutput> Model { get; }
    }
    public class AdamWOptimizer<T, TInput, TOutput> : AdamWOptimizer, IModelOptimizer<T, TInput, TOutput> where T : struct
    {
        public AdamWOptimizer(IGradientModel<T, TInput, TOutput> model, AdamWOptimizerOptions<T, TInput, TOutput> options = null)
            : base(options ?? new AdamWOptimizerOptions<T, TInput, TOutput>()) { Elem<T>.Check(); Model = ModelCheck.NotNull(model); }
        public IGradientModel<T, TInput, TOutput> Model { get; }
    }
    public class StochasticGradientDescentOptimizer<T, TInput, TOutput> : StochasticGradientDescentOptimizer, IModelOptimizer<T, TInput, TOutput> where T : struct
    {
        public StochasticGradientDescentOptimizer(IGradientModel<T, TInput, TOutput> model, StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> options = null)
            : base(options ?? new StochasticGradientDescentOptimizerOptions<T, TInput, TOutput>()) { Elem<T>.Check(); Model = ModelCheck.NotNull(model); }
        public IGradientModel<T, TInput, TOutput> Model { get; }
    }
    public class MomentumOptimizer<T, TInput, TOutput> : MomentumOptimizer, IModelOptimizer<T, TInput, TOutput> where T : struct
    {
        public MomentumOptimizer(IGradientModel<T, TInput, TOutput> model, MomentumOptimizerOptions<T, TInput, TOutput> options = null)
            : base(options ?? new MomentumOptimizerOptions<T, TInput, TOutput>()) { Elem<T>.Check(); Model = ModelCheck.NotNull(model); }
        public IGradientModel<T, TInput, TOutput> Model { get; }
    }
    public class RootMeanSquarePropagationOptimizer<T, TInput, TOutput> : RootMeanSquarePropagationOptimizer, IModelOptimizer<T, TInput, TOutput> where T : struct
    {
        public RootMeanSquarePropagationOptimizer(IGradientModel<T, TInput, TOutput> model, RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> options = null)
            : base(options ?? new RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput>()) { Elem<T>.Check(); Model = ModelCheck.NotNull(model); }
        public IGradientModel<T, TInput, TOutput> Model { get; }
    }
}
