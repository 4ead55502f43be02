package org.shardopt;

/** The Momentum update rule, run by a sharded optimizer on its full buffer or its shard. */
public final class MomentumOptimizer<T, TInput, TOutput> extends Optimizer<T, TInput, TOutput> {
    public MomentumOptimizer() { this(new MomentumOptimizerOptions()); }

    public MomentumOptimizer(MomentumOptimizerOptions options) { super(null, options); }

    /** AiDotNet's form: the model to train and the options (batch size, epochs, learning rate...). */
    public MomentumOptimizer(IGradientModel<T, TInput, TOutput> model, MomentumOptimizerOptions options) { super(model, options); }

    public MomentumOptimizer(IGradientModel<T, TInput, TOutput> model) { this(model, new MomentumOptimizerOptions()); }

    @Override
    public MomentumOptimizerOptions getOptions() { return (MomentumOptimizerOptions) options; }
}
