package org.shardopt;

/** NadamOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_NADAM: torch.optim's). */
public class NadamOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public NadamOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_NADAM); }
}
