package org.shardopt;

/** The StochasticGradientDescent update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class StochasticGradientDescentOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public StochasticGradientDescentOptimizer() { this(new StochasticGradientDescentOptimizerOptions()); }

    public StochasticGradientDescentOptimizer(StochasticGradientDescentOptimizerOptions options) { super(null, options); }

    /** AiDotNet's form: the model to train and the options (batch size, epochs, learning rate...). */
    public StochasticGradientDescentOptimizer(IGradientModel<T, TInput, TOutput> model, StochasticGradientDescentOptimizerOptions options) { super(model, options); }

    public StochasticGradientDescentOptimizer(IGradientModel<T, TInput, TOutput> model) { this(model, new StochasticGradientDescentOptimizerOptions()); }

    @Override
    public StochasticGradientDescentOptimizerOptions getOptions() { return (StochasticGradientDescentOptimizerOptions) options; }
}
