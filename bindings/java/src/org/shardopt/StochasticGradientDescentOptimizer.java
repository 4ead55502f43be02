package org.shardopt;

/** AiDotNet's StochasticGradientDescentOptimizer: the SGD rule, run by a sharded optimizer on its full buffer or its shard. */
public class StochasticGradientDescentOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public StochasticGradientDescentOptimizer() { this(null, new StochasticGradientDescentOptimizerOptions<>()); }
    public StochasticGradientDescentOptimizer(StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public StochasticGradientDescentOptimizer(IGradientModel<T, TInput, TOutput> model, StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
