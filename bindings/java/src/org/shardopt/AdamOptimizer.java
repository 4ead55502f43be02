package org.shardopt;

/** AiDotNet's AdamOptimizer: the Adam update rule, which a sharded optimizer runs on its full buffer or its shard. */
public class AdamOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdamOptimizer() { this(null, new AdamOptimizerOptions<>()); }
    public AdamOptimizer(AdamOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    /** AiDotNet's form: the model optimize(inputData) trains, and the options. */
    public AdamOptimizer(IGradientModel<T, TInput, TOutput> model, AdamOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
