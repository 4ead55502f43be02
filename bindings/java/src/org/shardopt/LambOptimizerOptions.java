package org.shardopt;

/** Options of LambOptimizer (library defaults). */
public final class LambOptimizerOptions extends OptimizerOptions {
    public LambOptimizerOptions() { super(LAMB); }
}
