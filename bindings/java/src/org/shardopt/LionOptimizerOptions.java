package org.shardopt;

/** LionOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_LION: torch.optim's). */
public class LionOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public LionOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_LION); }
}
