package org.shardopt;

/** AdamWOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_ADAMW). */
public class AdamWOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public AdamWOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_ADAMW); }
}
