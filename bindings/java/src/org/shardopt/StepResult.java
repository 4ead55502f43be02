package org.shardopt;

/** The outcome of one step(). */
public final class StepResult {
    public final boolean applied, skippedNonFinite, accumulating;
    public final double gradNorm;
    /** Where step() spent its time, in seconds: waiting for gradient reductions, the update, the
     * collectives after it (ZeRO parameter allgather, Local SGD averaging). */
    public final double reduceWaitSeconds, updateSeconds, postUpdateSeconds;
    /** Bytes this rank moved over the optimizer's communicators since the previous step returned. */
    public final long bytesSent;

    StepResult(boolean applied, boolean skippedNonFinite, boolean accumulating, double gradNorm,
               double reduceWaitSeconds, double updateSeconds, double postUpdateSeconds, long bytesSent) {
        this.bytesSent = bytesSent;
        this.applied = applied;
        this.skippedNonFinite = skippedNonFinite;
        this.accumulating = accumulating;
        this.gradNorm = gradNorm;
        this.reduceWaitSeconds = reduceWaitSeconds;
        this.updateSeconds = updateSeconds;
        this.postUpdateSeconds = postUpdateSeconds;
    }
}
