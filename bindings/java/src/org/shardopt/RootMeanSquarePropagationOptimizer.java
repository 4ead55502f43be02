package org.shardopt;

/** The RootMeanSquarePropagation update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class RootMeanSquarePropagationOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public RootMeanSquarePropagationOptimizer() { this(new RootMeanSquarePropagationOptimizerOptions()); }

    public RootMeanSquarePropagationOptimizer(RootMeanSquarePropagationOptimizerOptions options) { super(null, options); }

    /** AiDotNet's form: the model to train and the options (batch size, epochs, learning rate...). */
    public RootMeanSquarePropagationOptimizer(IGradientModel<T, TInput, TOutput> model, RootMeanSquarePropagationOptimizerOptions options) { super(model, options); }

    public RootMeanSquarePropagationOptimizer(IGradientModel<T, TInput, TOutput> model) { this(model, new RootMeanSquarePropagationOptimizerOptions()); }

    @Override
    public RootMeanSquarePropagationOptimizerOptions getOptions() { return (RootMeanSquarePropagationOptimizerOptions) options; }
}
