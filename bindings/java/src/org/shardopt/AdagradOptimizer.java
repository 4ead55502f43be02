package org.shardopt;

/** The Adagrad update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class AdagradOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdagradOptimizer() { this(new AdagradOptimizerOptions()); }

    public AdagradOptimizer(AdagradOptimizerOptions options) { super(null, options); }

    /** AiDotNet's form: the model to train and the options (batch size, epochs, learning rate...). */
    public AdagradOptimizer(IGradientModel<T, TInput, TOutput> model, AdagradOptimizerOptions options) { super(model, options); }

    public AdagradOptimizer(IGradientModel<T, TInput, TOutput> model) { this(model, new AdagradOptimizerOptions()); }

    @Override
    public AdagradOptimizerOptions getOptions() { return (AdagradOptimizerOptions) options; }
}
