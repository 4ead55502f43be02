package org.shardopt;

/** Options of AdamWOptimizer (library defaults). */
public final class AdamWOptimizerOptions extends OptimizerOptions {
    public AdamWOptimizerOptions() { super(ADAMW); }
}
