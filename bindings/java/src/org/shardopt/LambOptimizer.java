package org.shardopt;

/** AiDotNet's LambOptimizer: the LAMB update rule, which a sharded optimizer runs on its full buffer or its shard. */
public class LambOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public LambOptimizer() { this(null, new LambOptimizerOptions<>()); }
    public LambOptimizer(LambOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    /** AiDotNet's form: the model optimize(inputData) trains, and the options. */
    public LambOptimizer(IGradientModel<T, TInput, TOutput> model, LambOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
