package org.shardopt;

/** Data parallel: gradients averaged per bucket, full update on every rank. */
public class DDPOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public DDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { super(wrappedOptimizer, config, DDP); }

    /** Constructs and initializes (collective). */
    public DDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
