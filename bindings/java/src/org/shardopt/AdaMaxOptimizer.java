package org.shardopt;

/** AiDotNet's AdaMaxOptimizer: the AdaMax rule (torch.optim.Adamax), run by a sharded optimizer on its full buffer or its shard. */
public class AdaMaxOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdaMaxOptimizer() { this(null, new AdaMaxOptimizerOptions<>()); }
    public AdaMaxOptimizer(AdaMaxOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public AdaMaxOptimizer(IGradientModel<T, TInput, TOutput> model, AdaMaxOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
