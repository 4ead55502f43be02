package org.shardopt;

/** AiDotNet's LambOptimizer: the LAMB rule, run by a sharded optimizer on its full buffer or its shard. */
public class LambOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public LambOptimizer() { this(null, new LambOptimizerOptions<>()); }
    public LambOptimizer(LambOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public LambOptimizer(IGradientModel<T, TInput, TOutput> model, LambOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
