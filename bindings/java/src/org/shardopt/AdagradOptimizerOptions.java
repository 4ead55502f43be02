package org.shardopt;

/** Options of AdagradOptimizer (library defaults). */
public final class AdagradOptimizerOptions extends OptimizerOptions {
    public AdagradOptimizerOptions() { super(ADAGRAD); }
}
