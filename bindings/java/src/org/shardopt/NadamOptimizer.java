package org.shardopt;

/** AiDotNet's NadamOptimizer: the NAdam rule (torch.optim.NAdam), run by a sharded optimizer on its full buffer or its shard. */
public class NadamOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public NadamOptimizer() { this(null, new NadamOptimizerOptions<>()); }
    public NadamOptimizer(NadamOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public NadamOptimizer(IGradientModel<T, TInput, TOutput> model, NadamOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
