package org.shardopt;

/** AiDotNet's AdaDeltaOptimizer: the AdaDelta rule (torch.optim.Adadelta), run by a sharded optimizer on its full buffer or its shard. */
public class AdaDeltaOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdaDeltaOptimizer() { this(null, new AdaDeltaOptimizerOptions<>()); }
    public AdaDeltaOptimizer(AdaDeltaOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public AdaDeltaOptimizer(IGradientModel<T, TInput, TOutput> model, AdaDeltaOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
