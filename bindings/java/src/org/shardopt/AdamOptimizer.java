package org.shardopt;

/** The Adam update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class AdamOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdamOptimizer() { this(new AdamOptimizerOptions()); }

    public AdamOptimizer(AdamOptimizerOptions options) { super(null, options); }

    /** AiDotNet's form: the model to train and the options (batch size, epochs, learning rate...). */
    public AdamOptimizer(IGradientModel<T, TInput, TOutput> model, AdamOptimizerOptions options) { super(model, options); }

    public AdamOptimizer(IGradientModel<T, TInput, TOutput> model) { this(model, new AdamOptimizerOptions()); }

    @Override
    public AdamOptimizerOptions getOptions() { return (AdamOptimizerOptions) options; }
}
