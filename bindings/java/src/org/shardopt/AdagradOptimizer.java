package org.shardopt;

/** AiDotNet's AdagradOptimizer: the Adagrad rule, run by a sharded optimizer on its full buffer or its shard. */
public class AdagradOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdagradOptimizer() { this(null, new AdagradOptimizerOptions<>()); }
    public AdagradOptimizer(AdagradOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public AdagradOptimizer(IGradientModel<T, TInput, TOutput> model, AdagradOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
