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

    public sealed class StochasticGradientDescentOptimizerOptions : OptimizerOptions { public StochasticGradientDescentOptimizerOptions() : base(shardopt_native.SHARDOPT_SGD) { } }
    /// <summary>SGD with momentum 0.9 (AiDotNet's MomentumOptimizer default).</summary>
    public sealed class MomentumOptimizerOptions : OptimizerOptions { public MomentumOptimizerOptions() : base(shardopt_native.SHARDOPT_SGD) { Momentum = 0.9; } }
    public sealed class AdamOptimizerOptions : OptimizerOptions { public AdamOptimizerOptions() : base(shardopt_native.SHARDOPT_ADAM) { } }
    public sealed class AdamWOptimizerOptions : OptimizerOptions { public AdamWOptimizerOptions() : base(shardopt_native.SHARDOPT_ADAMW) { } }
    public sealed class RootMeanSquarePropagationOptimizerOptions : OptimizerOptions { public RootMeanSquarePropagationOptimizerOptions() : base(shardopt_native.SHARDOPT_RMSPROP) { } }
    public sealed class AdagradOptimizerOptions : OptimizerOptions { public AdagradOptimizerOptions() : base(shardopt_native.SHARDOPT_ADAGRAD) { } }
    public sealed class LambOptimizerOptions : OptimizerOptions { public LambOptimizerOptions() : base(shardopt_native.SHARDOPT_LAMB) { } }

    /// <summary>A base optimizer (AiDotNet's IOptimizer): its options, wrapped by a sharded optimizer.</summary>
    public abstract class Optimizer
    {
        protected Optimizer(OptimizerOptions options) { Options = options ?? throw new ArgumentNullException(nameof(options)); }
        public OptimizerOptions Options { get; }
        public OptimizerOptions GetOptions() => Options;
    }

    public sealed class StochasticGradientDescentOptimizer : Optimizer { public StochasticGradientDescentOptimizer(StochasticGradientDescentOptimizerOptions o = null) : base(o ?? new StochasticGradientDescentOptimizerOptions()) { } }
    public sealed class MomentumOptimizer : Optimizer { public MomentumOptimizer(MomentumOptimizerOptions o = null) : base(o ?? new MomentumOptimizerOptions()) { } }
    public sealed class AdamOptimizer : Optimizer { public AdamOptimizer(AdamOptimizerOptions o = null) : base(o ?? new AdamOptimizerOptions()) { } }
    public sealed class AdamWOptimizer : Optimizer { public AdamWOptimizer(AdamWOptimizerOptions o = null) : base(o ?? new AdamWOptimizerOptions()) { } }
    public sealed class RootMeanSquarePropagationOptimizer : Optimizer { public RootMeanSquarePropagationOptimizer(RootMeanSquarePropagationOptimizerOptions o = null) : base(o ?? new RootMeanSquarePropagationOptimizerOptions()) { } }
    public sealed class AdagradOptimizer : Optimizer { public AdagradOptimizer(AdagradOptimizerOptions o = null) : base(o ?? new AdagradOptimizerOptions()) { } }
    public sealed class LambOptimizer : Optimizer { public LambOptimizer(LambOptimizerOptions o = null) : base(o ?? new LambOptimizerOptions()) { } }
}
