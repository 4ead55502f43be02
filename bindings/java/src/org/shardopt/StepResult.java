package org.shardopt;

/** The outcome of one step(): seconds waiting for gradient reductions, in the update and in the collectives after it;
 *  bytes this rank moved since the previous step. */
public final class StepResult {
    public final boolean applied, skippedNonFinite, accumulating;
    public final double gradNorm, reduceWaitSeconds, updateSeconds, postUpdateSeconds;
    public final long bytesSent;
    StepResult(org.shardopt.internal.shardopt_step_result r) {
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
