package org.shardopt;

/** Parameters, gradients and state sharded at rest (ZeRO-3). */
public class FSDPOptimizer extends ShardedOptimizer {
    public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) { super(wrappedOptimizer, config, FSDP); }

    /** Constructs and initializes (collective). */
    public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
