package org.shardopt;

import org.shardopt.internal.shardopt_nativeJNI;

/** What one forward or backward call of a {@link PipelineStage} is about. gradient() and parameters() are views of the
 *  library's memory that throw IllegalStateException once the call has returned. */
public final class PipelineCall {
    private final long call; // the library's shardopt_stage_call, for this call's duration
    private final int microBatch, chunk, modelChunk;
    private final boolean first, last;
    private final ShardedOptimizer<?, ?, ?> optimizer;
    private final ParameterLayout.Precision precision;
    private final NativeView.Lifetime life = new NativeView.Lifetime("a pipeline stage call's memory");
    private double loss;
    private boolean lossSet;
    PipelineCall(long call, ShardedOptimizer<?, ?, ?> optimizer, ParameterLayout.Precision precision) {
        this.call = call;
        microBatch = shardopt_nativeJNI.shardopt_stage_call_micro_batch_get(call, null);
        chunk = shardopt_nativeJNI.shardopt_stage_call_chunk_get(call, null);
        modelChunk = shardopt_nativeJNI.shardopt_stage_call_model_chunk_get(call, null);
        first = shardopt_nativeJNI.shardopt_stage_call_first_get(call, null) != 0;
        last = shardopt_nativeJNI.shardopt_stage_call_last_get(call, null) != 0;
        this.optimizer = optimizer;
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
    public void setLoss(double loss) { life.check(); this.loss = loss; lossSet = true; }
    /** The gradient of tensor t of this stage's layout, summed over the batch's micro-batches so far: add into it. */
    public NativeView gradient(int tensor) {
        life.check();
        long[] g = shardopt_nativeJNI.shardopt_stage_call_grad(call, null, tensor);
        return new NativeView(g[0], g[1], precision, life, false);
    }
    /** Tensor t's parameters (the optimizer updates them after the batch). */
    public NativeView parameters(int tensor) {
        life.check();
        long address = org.shardopt.internal.shardopt_native.shardopt_optimizer_tensor_parameters(optimizer.h(), tensor);
        return new NativeView(address, optimizer.getTensorSize(tensor), precision, life, true);
    }
    boolean lossSet() { return lossSet; }
    double loss() { return loss; }
    void end() { life.invalidate("the stage call returned"); }
}
