using System;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>AiDotNet's AsyncSGDOptimizer, asynchronous for real: bounded-staleness data parallelism (stale
    /// synchronous parallel) over a sharded parameter server. Each rank owns a shard of the parameters (its master
    /// copy and optimizer state) and applies every update to it; workers push gradients to the owners and take new
    /// versions from them without a global barrier. allowStaleness s: no gradient is applied more than s clocks after
    /// the version it was computed on, and no worker runs more than s clocks ahead of the parameters it computes on;
    /// a rank slower than that is not waited for, its gradients join later updates. s = 0 is synchronous training,
    /// DDP's result bit for bit. Trains through Optimize; the step protocol (ZeroGrad ... Step) throws
    /// NotSupportedException. Host memory; compression, clipping, gradient accumulation and LAMB on more than one
    /// rank are refused (docs/async_sgd.md).</summary>
    public class AsyncSGDOptimizer : ShardedOptimizer
    {
        /// <exception cref="ArgumentOutOfRangeException">allowStaleness is negative</exception>
        public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0)
            : base(wrappedOptimizer, config, AsyncArgs.Checking(allowStaleness)) { AllowStaleness = allowStaleness; }
        /// <summary>The clocks a gradient may lag behind the parameters it is applied to (0: synchronous).</summary>
        public int AllowStaleness { get; }
        internal override void Configure(shardopt_sharding_options s) => AsyncArgs.Configure(s, AllowStaleness);
    }

    public class AsyncSGDOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0)
            : base(wrappedOptimizer, config, AsyncArgs.Checking(allowStaleness)) { AllowStaleness = allowStaleness; }
        public int AllowStaleness { get; }
        internal override void Configure(shardopt_sharding_options s) => AsyncArgs.Configure(s, AllowStaleness);
    }

    public class AsyncSGDOptimizer<T, TInput, TOutput> : AsyncSGDOptimizer<T> where T : struct
    {
        public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0)
            : base(wrappedOptimizer, config, allowStaleness) { }
    }

    internal static class AsyncArgs
    {
        // validates the staleness in the base(...) call, before the (virtual) Configure can see the property
        internal static int Checking(int allowStaleness)
        {
            if (allowStaleness < 0)
                throw new ArgumentOutOfRangeException(nameof(allowStaleness), allowStaleness, "allowStaleness must be >= 0");
            return shardopt_native.SHARDOPT_ASYNC_SGD;
        }
        // also called by the base constructor's validation, before the property is set: nothing is created then
        internal static void Configure(shardopt_sharding_options s, int allowStaleness) => s.async_staleness = allowStaleness;
    }
}
