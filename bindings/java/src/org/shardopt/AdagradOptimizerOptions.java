package org.shardopt;

/** AdagradOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_ADAGRAD). */
public class AdagradOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public AdagradOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_ADAGRAD); }
}
