package org.shardopt;

/** The AdamW update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class AdamWOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdamWOptimizer() { this(new AdamWOptimizerOptions()); }

    public AdamWOptimizer(AdamWOptimizerOptions options) { super(null, options); }

    /** AiDotNet's form: the model to train and the options (batch size, epochs, learning rate...). */
    public AdamWOptimizer(IGradientModel<T, TInput, TOutput> model, AdamWOptimizerOptions options) { super(model, options); }

    public AdamWOptimizer(IGradientModel<T, TInput, TOutput> model) { this(model, new AdamWOptimizerOptions()); }

    @Override
    public AdamWOptimizerOptions getOptions() { return (AdamWOptimizerOptions) options; }
}
