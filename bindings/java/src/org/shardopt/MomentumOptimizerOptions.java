package org.shardopt;

/** MomentumOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_MOMENTUM). */
public class MomentumOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public MomentumOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_MOMENTUM); }
}
