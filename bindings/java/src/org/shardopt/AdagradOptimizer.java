package org.shardopt;

/** The Adagrad update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class AdagradOptimizer extends Optimizer {
    public AdagradOptimizer() { this(new AdagradOptimizerOptions()); }

    public AdagradOptimizer(AdagradOptimizerOptions options) { super(options); }

    @Override
    public AdagradOptimizerOptions getOptions() { return (AdagradOptimizerOptions) options; }
}
