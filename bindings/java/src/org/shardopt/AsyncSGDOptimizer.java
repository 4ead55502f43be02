package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/**
 * AiDotNet's AsyncSGDOptimizer, asynchronous for real: bounded-staleness data parallelism over a sharded parameter server
 * (docs/async_sgd.md). allowStaleness s: no gradient is applied more than s clocks after the version it was computed on;
 * s = 0 is synchronous, DDP's result bit for bit. Trains through optimize; the step protocol throws
 * UnsupportedOperationException.
 */
public class AsyncSGDOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final int allowStaleness;

    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { this(wrappedOptimizer, config, 0); }

    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int allowStaleness) {
        super(wrappedOptimizer, config, s -> {
            s.setStrategy(shardopt_strategy.SHARDOPT_ASYNC_SGD);
            s.setAsync_staleness(allowStaleness);
        });
        this.allowStaleness = allowStaleness;
    }

    /** Constructs and initializes (collective). */
    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int allowStaleness,
                             ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config, allowStaleness);
        initialize(layout, initial);
    }

    /** The clocks a gradient may lag behind the parameters it is applied to (0: synchronous). */
    public int getAllowStaleness() { return allowStaleness; }
}
