package org.shardopt;

/** Data parallel: gradients averaged per bucket, full update on every rank. */
public class DDPOptimizer extends ShardedOptimizer {
    public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) { super(wrappedOptimizer, config, DDP); }

    /** Constructs and initializes (collective). */
    public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
