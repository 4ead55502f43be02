package org.shardopt;

/** Local SGD: local steps, parameters averaged every LocalSteps steps of the configuration. */
public class LocalSGDOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public LocalSGDOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config) { super(wrapped, config, strategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_LOCAL_SGD)); }
    /** Constructs and initializes (collective). */
    public LocalSGDOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) { this(wrapped, config); initialize(layout, initial); }
}
