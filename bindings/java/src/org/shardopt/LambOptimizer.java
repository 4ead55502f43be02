package org.shardopt;

/** The Lamb update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class LambOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public LambOptimizer() { this(new LambOptimizerOptions()); }

    public LambOptimizer(LambOptimizerOptions options) { super(null, options); }

    /** AiDotNet's form: the model to train and the options (batch size, epochs, learning rate...). */
    public LambOptimizer(IGradientModel<T, TInput, TOutput> model, LambOptimizerOptions options) { super(model, options); }

    public LambOptimizer(IGradientModel<T, TInput, TOutput> model) { this(model, new LambOptimizerOptions()); }

    @Override
    public LambOptimizerOptions getOptions() { return (LambOptimizerOptions) options; }
}
