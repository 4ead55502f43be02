package org.shardopt;

/** StochasticGradientDescentOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_SGD). */
public class StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public StochasticGradientDescentOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_SGD); }
}
