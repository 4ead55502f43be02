package org.shardopt;

/** AiDotNet's LionOptimizer: the Lion rule (sign of an interpolated momentum; torch.optim-style defaults: lr 1e-4, betas 0.9 / 0.99), run by a sharded optimizer on its full buffer or its shard. */
public class LionOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public LionOptimizer() { this(null, new LionOptimizerOptions<>()); }
    public LionOptimizer(LionOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public LionOptimizer(IGradientModel<T, TInput, TOutput> model, LionOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
