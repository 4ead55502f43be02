package org.shardopt;

/** AdafactorOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_ADAFACTOR: torch.optim's). */
public class AdafactorOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public AdafactorOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_ADAFACTOR); }
}
