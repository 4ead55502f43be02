package org.shardopt;

/** AdaDeltaOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_ADADELTA: torch.optim's). */
public class AdaDeltaOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public AdaDeltaOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_ADADELTA); }
}
