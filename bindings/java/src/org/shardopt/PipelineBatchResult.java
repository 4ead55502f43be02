package org.shardopt;

import org.shardopt.internal.shardopt_pipeline_result;

/** The outcome of one {@link PipelineRunner#runBatch()}. */
public final class PipelineBatchResult {
    /** Mean of the last chunk's micro-batch losses (every stage gets it). */
    public final double loss;
    /** The batch's one optimizer step updated the parameters. */
    public final boolean stepApplied;
    /** This rank: inside the stage's callbacks, waiting for activations and gradients, from the batch's start to its
     *  last action, in seconds. */
    public final double busySeconds, waitSeconds, spanSeconds;
    /** The pipeline: 1 - summed busy / (stages x longest span). */
    public final double bubbleFraction;
    /** Most forwards this rank held before their backward; activation and gradient messages of this rank. */
    public final int peakActivations, sends, recvs;

    PipelineBatchResult(shardopt_pipeline_result r) {
        loss = r.getLoss();
        stepApplied = r.getStep_applied() != 0;
        busySeconds = r.getBusy_seconds();
        waitSeconds = r.getWait_seconds();
        spanSeconds = r.getSpan_seconds();
        bubbleFraction = r.getBubble_fraction();
        peakActivations = r.getPeak_activations();
        sends = r.getSends();
        recvs = r.getRecvs();
    }
}
