package org.shardopt;

/** AiDotNet's AdamOptimizer: the Adam rule, run by a sharded optimizer on its full buffer or its shard. */
public class AdamOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdamOptimizer() { this(null, new AdamOptimizerOptions<>()); }
    public AdamOptimizer(AdamOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public AdamOptimizer(IGradientModel<T, TInput, TOutput> model, AdamOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
