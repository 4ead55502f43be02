package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/** ZeRO-3: FSDPOptimizer under DeepSpeed's name. */
public class ZeRO3Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO3Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        super(wrappedOptimizer, config, strategy(shardopt_strategy.SHARDOPT_FSDP));
    }

    /** Constructs and initializes (collective). */
    public ZeRO3Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
