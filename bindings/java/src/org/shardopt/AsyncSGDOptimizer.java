package org.shardopt;

import org.shardopt.internal.shardopt_sharding_options;
import org.shardopt.internal.shardopt_strategy;

/**
 * AiDotNet's AsyncSGDOptimizer, asynchronous for real: bounded-staleness data parallelism (stale synchronous
 * parallel) over a sharded parameter server. Each rank owns a shard of the parameters (its master copy and
 * optimizer state) and applies every update to it; workers push gradients to the owners and take new versions
 * from them without a global barrier. allowStaleness s: no gradient is applied more than s clocks after the
 * version it was computed on, and no worker runs more than s clocks ahead of the parameters it computes on;
 * a rank slower than that is not waited for, its gradients join later updates. s = 0 is synchronous training,
 * DDP's result bit for bit. Trains through {@link #optimize}; the step protocol (zeroGrad ... step) throws
 * UnsupportedOperationException. Host memory; compression, clipping, gradient accumulation and LAMB on more
 * than one rank are refused (docs/async_sgd.md).
 */
public class AsyncSGDOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final int allowStaleness;

    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        this(wrappedOptimizer, config, 0);
    }

    /** @throws IllegalArgumentException when allowStaleness is negative */
    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config,
                             int allowStaleness) {
        super(wrappedOptimizer, config, shardopt_strategy.SHARDOPT_ASYNC_SGD, checkStaleness(allowStaleness));
        this.allowStaleness = allowStaleness;
    }

    /** Constructs and initializes (collective). */
    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config,
                             int allowStaleness, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config, allowStaleness);
        initialize(layout, initial);
    }

    /** The clocks a gradient may lag behind the parameters it is applied to (0: synchronous). */
    public int getAllowStaleness() { return allowStaleness; }

    private static double checkStaleness(int s) {
        if (s < 0) throw new IllegalArgumentException("allowStaleness must be >= 0 (got " + s + ")");
        return s;
    }

    @Override
    void configure(shardopt_sharding_options s) {
        // also called by the base constructor's validation, before allowStaleness is set: nothing is created then
        s.setAsync_staleness(allowStaleness);
    }
}
