package org.shardopt;

/** The Momentum update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class MomentumOptimizer extends Optimizer {
    public MomentumOptimizer() { this(new MomentumOptimizerOptions()); }

    public MomentumOptimizer(MomentumOptimizerOptions options) { super(options); }

    @Override
    public MomentumOptimizerOptions getOptions() { return (MomentumOptimizerOptions) options; }
}
