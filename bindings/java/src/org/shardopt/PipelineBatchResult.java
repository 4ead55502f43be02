package org.shardopt;

/** The outcome of one {@link PipelineRunner#runBatch()}. */
public final class PipelineBatchResult {
    /** Mean of the last chunk's micro-batch losses (every stage gets it). */
    public final double loss;
    /** The batch's one optimizer step updated the parameters. */
    public final boolean stepApplied;
    /** This rank: inside the stage's forward/backward, waiting for activations and gradients, and from the
     *  batch's start to its last action, in seconds. */
    public final double busySeconds, waitSeconds, spanSeconds;
    /** The pipeline: 1 - summed busy / (stages x longest span). */
    public final double bubbleFraction;
    /** Most forwards this rank held before their backward; activation and gradient messages of this rank. */
    public final int peakActivations, sends, recvs;

    PipelineBatchResult(double loss, boolean stepApplied, double busySeconds, double waitSeconds, double spanSeconds,
                        double bubbleFraction, int peakActivations, int sends, int recvs) {
        this.loss = loss;
        this.stepApplied = stepApplied;
        this.busySeconds = busySeconds;
        this.waitSeconds = waitSeconds;
        this.spanSeconds = spanSeconds;
        this.bubbleFraction = bubbleFraction;
        this.peakActivations = peakActivations;
        this.sends = sends;
        this.recvs = recvs;
    }
}
