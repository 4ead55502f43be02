package org.shardopt;

/** Options of AdamOptimizer (library defaults). */
public final class AdamOptimizerOptions extends OptimizerOptions {
    public AdamOptimizerOptions() { super(ADAM); }
}
