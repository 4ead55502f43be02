package org.shardopt;

/** The Lamb update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class LambOptimizer extends Optimizer {
    public LambOptimizer() { this(new LambOptimizerOptions()); }

    public LambOptimizer(LambOptimizerOptions options) { super(options); }

    @Override
    public LambOptimizerOptions getOptions() { return (LambOptimizerOptions) options; }
}
