package org.shardopt;

/** The outcome of one step(). */
public final class StepResult {
    public final boolean applied, skippedNonFinite, accumulating;
    public final double gradNorm;

    StepResult(boolean applied, boolean skippedNonFinite, boolean accumulating, double gradNorm) {
        this.applied = applied;
        this.skippedNonFinite = skippedNonFinite;
        this.accumulating = accumulating;
        this.gradNorm = gradNorm;
    }
}
