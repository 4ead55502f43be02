package org.shardopt;

/** A base optimizer (AiDotNet's IOptimizer): its options, wrapped by a sharded optimizer. */
public abstract class Optimizer {
    final OptimizerOptions options;

    protected Optimizer(OptimizerOptions options) {
        if (options == null) throw new NullPointerException("options");
        this.options = options;
    }

    public OptimizerOptions getOptions() { return options; }
}
