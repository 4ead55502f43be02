package org.shardopt;

/** Options of StochasticGradientDescentOptimizer (library defaults). */
public final class StochasticGradientDescentOptimizerOptions extends OptimizerOptions {
    public StochasticGradientDescentOptimizerOptions() { super(SGD); }
}
