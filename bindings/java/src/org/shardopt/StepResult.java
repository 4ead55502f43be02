package org.shardopt;

import org.shardopt.internal.shardopt_step_result;

/** The outcome of one step(). */
public final class StepResult {
    public final boolean applied, skippedNonFinite, accumulating;
    public final double gradNorm;
    /** Where step() spent its time, in seconds: waiting for gradient reductions, the update, the collectives after it. */
    public final double reduceWaitSeconds, updateSeconds, postUpdateSeconds;
    /** Bytes this rank moved over the optimizer's communicators since the previous step returned. */
    public final long bytesSent;

    StepResult(shardopt_step_result r) {
        applied = r.getApplied() != 0;
        skippedNonFinite = r.getSkipped_nonfinite() != 0;
        accumulating = r.getAccumulating() != 0;
        gradNorm = r.getGrad_norm();
        reduceWaitSeconds = r.getReduce_wait_seconds();
        updateSeconds = r.getUpdate_seconds();
        postUpdateSeconds = r.getPost_update_seconds();
        bytesSent = r.getBytes_sent();
    }
}
