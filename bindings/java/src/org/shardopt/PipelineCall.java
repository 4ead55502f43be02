package org.shardopt;

import org.shardopt.internal.shardopt_native;

/**
 * What one forward or backward call of a {@link PipelineStage} is about. gradient() and parameters() are views
 * of the library's memory that throw IllegalStateException once the call has returned.
 */
public final class PipelineCall {
    private final int microBatch, chunk, modelChunk;
    private final boolean first, last;
    private final ParameterLayout.Precision precision;
    private final Lifetime life = new Lifetime("a pipeline stage call's memory");
    private double loss;
    private boolean lossSet;

    PipelineCall(int microBatch, int chunk, int modelChunk, boolean first, boolean last, ParameterLayout.Precision precision) {
        this.microBatch = microBatch;
        this.chunk = chunk;
        this.modelChunk = modelChunk;
        this.first = first;
        this.last = last;
        this.precision = precision;
    }

    public int getMicroBatch() { return microBatch; }
    /** This rank's chunk, 0 .. virtualStages - 1. */
    public int getChunk() { return chunk; }
    /** Its place in the model: chunk * p + pipeline rank. */
    public int getModelChunk() { return modelChunk; }
    /** The model's first chunk: no input. */
    public boolean isFirst() { return first; }
    /** The model's last chunk: sets the loss, has no output. */
    public boolean isLast() { return last; }

    /** The micro-batch's loss, from the forward of the model's last chunk. */
    public void setLoss(double loss) {
        life.check();
        this.loss = loss;
        lossSet = true;
    }

    /** The gradient of tensor t of this stage's layout, summed over the batch's micro-batches so far: add this
     *  micro-batch's into it. */
    public NativeView gradient(int tensor) {
        life.check();
        return new NativeView(shardopt_native.so_stage_grad(tensor), precision, life);
    }

    /** Tensor t's parameters (read them; the optimizer updates them after the batch). */
    public NativeView parameters(int tensor) {
        life.check();
        return new NativeView(shardopt_native.so_stage_parameters(tensor), precision, life);
    }

    boolean lossSet() { return lossSet; }
    double loss() { return loss; }
    void end() { life.invalidate("the stage call returned"); }
}
