package org.shardopt;

/** Local steps; parameters averaged every LocalSteps steps of the configuration. */
public class LocalSGDOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public LocalSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { super(wrappedOptimizer, config, LOCAL_SGD); }

    /** Constructs and initializes (collective). */
    public LocalSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
