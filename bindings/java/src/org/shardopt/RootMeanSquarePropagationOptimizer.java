package org.shardopt;

/** AiDotNet's RootMeanSquarePropagationOptimizer: the RMSprop update rule, which a sharded optimizer runs on its full buffer or its shard. */
public class RootMeanSquarePropagationOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public RootMeanSquarePropagationOptimizer() { this(null, new RootMeanSquarePropagationOptimizerOptions<>()); }
    public RootMeanSquarePropagationOptimizer(RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    /** AiDotNet's form: the model optimize(inputData) trains, and the options. */
    public RootMeanSquarePropagationOptimizer(IGradientModel<T, TInput, TOutput> model, RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
