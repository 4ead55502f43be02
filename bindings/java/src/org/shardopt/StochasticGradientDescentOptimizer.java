package org.shardopt;

/** The StochasticGradientDescent update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class StochasticGradientDescentOptimizer extends Optimizer {
    public StochasticGradientDescentOptimizer() { this(new StochasticGradientDescentOptimizerOptions()); }

    public StochasticGradientDescentOptimizer(StochasticGradientDescentOptimizerOptions options) { super(options); }

    @Override
    public StochasticGradientDescentOptimizerOptions getOptions() { return (StochasticGradientDescentOptimizerOptions) options; }
}
