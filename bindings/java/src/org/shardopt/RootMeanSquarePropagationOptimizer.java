package org.shardopt;

/** The RootMeanSquarePropagation update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class RootMeanSquarePropagationOptimizer extends Optimizer {
    public RootMeanSquarePropagationOptimizer() { this(new RootMeanSquarePropagationOptimizerOptions()); }

    public RootMeanSquarePropagationOptimizer(RootMeanSquarePropagationOptimizerOptions options) { super(options); }

    @Override
    public RootMeanSquarePropagationOptimizerOptions getOptions() { return (RootMeanSquarePropagationOptimizerOptions) options; }
}
