package org.shardopt;

/** AiDotNet's RootMeanSquarePropagationOptimizer: the RMSprop rule, run by a sharded optimizer on its full buffer or its shard. */
public class RootMeanSquarePropagationOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public RootMeanSquarePropagationOptimizer() { this(null, new RootMeanSquarePropagationOptimizerOptions<>()); }
    public RootMeanSquarePropagationOptimizer(RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public RootMeanSquarePropagationOptimizer(IGradientModel<T, TInput, TOutput> model, RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
