package org.shardopt;

/** Options of MomentumOptimizer (library defaults ; momentum 0.9 as in AiDotNet). */
public final class MomentumOptimizerOptions extends OptimizerOptions {
    public MomentumOptimizerOptions() { super(SGD); setMomentum(0.9); }
}
