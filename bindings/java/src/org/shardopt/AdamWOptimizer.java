package org.shardopt;

/** AiDotNet's AdamWOptimizer: the AdamW rule, run by a sharded optimizer on its full buffer or its shard. */
public class AdamWOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdamWOptimizer() { this(null, new AdamWOptimizerOptions<>()); }
    public AdamWOptimizer(AdamWOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public AdamWOptimizer(IGradientModel<T, TInput, TOutput> model, AdamWOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
