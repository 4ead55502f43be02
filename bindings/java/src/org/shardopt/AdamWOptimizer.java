package org.shardopt;

/** The AdamW update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class AdamWOptimizer extends Optimizer {
    public AdamWOptimizer() { this(new AdamWOptimizerOptions()); }

    public AdamWOptimizer(AdamWOptimizerOptions options) { super(options); }

    @Override
    public AdamWOptimizerOptions getOptions() { return (AdamWOptimizerOptions) options; }
}
