package org.shardopt;

/** AiDotNet's MomentumOptimizer: the SGD-with-momentum rule, run by a sharded optimizer on its full buffer or its shard. */
public class MomentumOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public MomentumOptimizer() { this(null, new MomentumOptimizerOptions<>()); }
    public MomentumOptimizer(MomentumOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public MomentumOptimizer(IGradientModel<T, TInput, TOutput> model, MomentumOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
