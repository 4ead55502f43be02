package org.shardopt;

/** AdaMaxOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_ADAMAX: torch.optim's). */
public class AdaMaxOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public AdaMaxOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_ADAMAX); }
}
