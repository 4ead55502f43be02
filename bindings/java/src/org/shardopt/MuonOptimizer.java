package org.shardopt;

/** AiDotNet's MuonOptimizer: the Muon rule (torch.optim.Muon: orthogonalized momentum on matrices, AdamW on every other tensor), run by a sharded optimizer on its full buffer or its shard. */
public class MuonOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public MuonOptimizer() { this(null, new MuonOptimizerOptions<>()); }
    public MuonOptimizer(MuonOptimizerOptions<T, TInput, TOutput> options) { this(null, options); }
    public MuonOptimizer(IGradientModel<T, TInput, TOutput> model, MuonOptimizerOptions<T, TInput, TOutput> options) { super(model, options); }
}
