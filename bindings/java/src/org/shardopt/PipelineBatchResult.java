package org.shardopt;

/** The outcome of one {@link PipelineRunner#runBatch()}: the mean loss of the last chunk's micro-batches (every stage
 *  gets it), whether the step applied, this rank's seconds in its callbacks, waiting and from start to end, the
 *  pipeline's bubble fraction, and this rank's most forwards held and its messages. */
public final class PipelineBatchResult {
    public final double loss, busySeconds, waitSeconds, spanSeconds, bubbleFraction;
    public final boolean stepApplied;
    public final int peakActivations, sends, recvs;
    PipelineBatchResult(org.shardopt.internal.shardopt_pipeline_result r) {
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
