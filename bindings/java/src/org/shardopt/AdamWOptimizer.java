package org.shardopt;

/** AiDotNet's AdamWOptimizer: the AdamW update rule, which a sharded optimizer runs on its full buffer or its shard. */
public class AdamWOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdamWOptimizer() { this(null, new AdamWOptimizerOptions<>()); }
    public AdamWOptimizer(AdamWOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    /** AiDotNet's form: the model optimize(inputData) trains, and the options. */
    public AdamWOptimizer(IGradientModel<T, TInput, TOutput> model, AdamWOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
