package org.shardopt;

import org.shardopt.internal.shardopt_optimizer_preset;

/** StochasticGradientDescentOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_SGD). */
public class StochasticGradientDescentOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public StochasticGradientDescentOptimizerOptions() { super(shardopt_optimizer_preset.SHARDOPT_PRESET_SGD); }
}
