package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/** Local SGD: local steps, parameters averaged every LocalSteps steps of the configuration. */
public class LocalSGDOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public LocalSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        super(wrappedOptimizer, config, strategy(shardopt_strategy.SHARDOPT_LOCAL_SGD));
    }

    /** Constructs and initializes (collective). */
    public LocalSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
