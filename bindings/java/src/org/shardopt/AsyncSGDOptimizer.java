package org.shardopt;

/** AiDotNet's AsyncSGDOptimizer, asynchronous for real (docs/async_sgd.md): bounded staleness over a sharded parameter
 *  server; no gradient is applied more than allowStaleness clocks after the version it was computed on (0: synchronous,
 *  DDP's result bit for bit). Trains through optimize; the step protocol throws UnsupportedOperationException. */
public class AsyncSGDOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final int allowStaleness;
    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { this(wrappedOptimizer, config, 0); }
    public AsyncSGDOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int allowStaleness) {
        super(wrappedOptimizer, config, s -> {
            s.setStrategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_ASYNC_SGD);
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
    public int getAllowStaleness() { return allowStaleness; }
}
