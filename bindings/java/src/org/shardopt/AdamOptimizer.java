package org.shardopt;

/** The Adam update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class AdamOptimizer extends Optimizer {
    public AdamOptimizer() { this(new AdamOptimizerOptions()); }

    public AdamOptimizer(AdamOptimizerOptions options) { super(options); }

    @Override
    public AdamOptimizerOptions getOptions() { return (AdamOptimizerOptions) options; }
}
