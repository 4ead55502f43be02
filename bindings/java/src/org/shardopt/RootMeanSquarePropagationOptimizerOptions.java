package org.shardopt;

/** RootMeanSquarePropagationOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_RMSPROP). */
public class RootMeanSquarePropagationOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public RootMeanSquarePropagationOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_RMSPROP); }
}
