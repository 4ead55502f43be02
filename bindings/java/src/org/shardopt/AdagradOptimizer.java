package org.shardopt;

/** AiDotNet's AdagradOptimizer: the Adagrad update rule, which a sharded optimizer runs on its full buffer or its shard. */
public class AdagradOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdagradOptimizer() { this(null, new AdagradOptimizerOptions<>()); }
    public AdagradOptimizer(AdagradOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    /** AiDotNet's form: the model optimize(inputData) trains, and the options. */
    public AdagradOptimizer(IGradientModel<T, TInput, TOutput> model, AdagradOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
