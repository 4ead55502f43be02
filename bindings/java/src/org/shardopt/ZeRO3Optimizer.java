package org.shardopt;

/** FSDPOptimizer under DeepSpeed's name. */
public class ZeRO3Optimizer extends ShardedOptimizer {
    public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) { super(wrappedOptimizer, config, FSDP); }

    /** Constructs and initializes (collective). */
    public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
