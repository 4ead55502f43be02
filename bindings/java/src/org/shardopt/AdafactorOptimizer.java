package org.shardopt;

/** AiDotNet's AdafactorOptimizer: the Adafactor rule (torch.optim.Adafactor: factored second moments of matrices), run by a sharded optimizer on its full buffer or its shard. */
public class AdafactorOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public AdafactorOptimizer() { this(null, new AdafactorOptimizerOptions<>()); }
    public AdafactorOptimizer(AdafactorOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public AdafactorOptimizer(IGradientModel<T, TInput, TOutput> model, AdafactorOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
