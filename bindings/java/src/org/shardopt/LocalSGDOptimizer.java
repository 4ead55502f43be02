package org.shardopt;

/** Local steps; parameters averaged every LocalSteps steps of the configuration. */
public class LocalSGDOptimizer extends ShardedOptimizer {
    public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) { super(wrappedOptimizer, config, LOCAL_SGD); }

    /** Constructs and initializes (collective). */
    public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
