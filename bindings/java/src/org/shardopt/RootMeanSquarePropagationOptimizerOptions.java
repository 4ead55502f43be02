package org.shardopt;

/** Options of RootMeanSquarePropagationOptimizer (library defaults). */
public final class RootMeanSquarePropagationOptimizerOptions extends OptimizerOptions {
    public RootMeanSquarePropagationOptimizerOptions() { super(RMSPROP); }
}
