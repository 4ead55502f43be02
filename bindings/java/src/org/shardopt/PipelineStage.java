package org.shardopt;

/**
 * This pipeline rank's model chunk(s), run by a {@link PipelineRunner}. A is the activation type: float[] for
 * FLOAT32 parameters, double[] for FLOAT64. Both methods run on the thread that calls runBatch.
 */
public interface PipelineStage<A> {
    /**
     * Forward of chunk call.getChunk() on micro-batch call.getMicroBatch(): input (a copy; empty on the model's
     * first chunk) to the output activation, which the runner sends to the next stage. On the model's last chunk
     * (call.isLast()) call call.setLoss(the micro-batch's loss) and return null.
     */
    A forward(PipelineCall call, A input);

    /**
     * Backward of the same chunk and micro-batch: input is what forward got, outputGradient the gradient of its
     * output (empty on the last chunk, which differentiates its loss). Adds the parameter gradients into
     * call.gradient(t) and returns the gradient of input (as many elements; null on the model's first chunk).
     */
    A backward(PipelineCall call, A input, A outputGradient);
}
