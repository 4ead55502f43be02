package org.shardopt;

/** AdamOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_ADAM). */
public class AdamOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public AdamOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_ADAM); }
}
