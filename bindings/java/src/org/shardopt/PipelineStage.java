package org.shardopt;

/** This pipeline rank's model chunk(s), run by a {@link PipelineRunner} on the thread that calls runBatch. A is the
 *  activation type: float[] for FLOAT32 parameters, double[] for FLOAT64. */
public interface PipelineStage<A> {
    /** Forward of chunk call.getChunk() on call.getMicroBatch(): input (a copy; empty on the model's first chunk) to the
     *  output activation sent to the next stage. The model's last chunk calls call.setLoss(loss) and returns null. */
    A forward(PipelineCall call, A input);
    /** Backward of the same: adds the parameter gradients into call.gradient(t) and returns the gradient of input (null on
     *  the model's first chunk); outputGradient is empty on the last chunk, which differentiates its loss. */
    A backward(PipelineCall call, A input, A outputGradient);
}
