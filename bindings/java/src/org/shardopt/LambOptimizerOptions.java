package org.shardopt;

/** LambOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_LAMB). */
public class LambOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public LambOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_LAMB); }
}
