package org.shardopt;

import java.lang.reflect.Type;
import java.nio.ByteOrder;
import org.shardopt.ParameterLayout.Precision;
import org.shardopt.internal.*;

/**
 * Pipeline parallelism (docs/pipeline.md): runs a {@link PipelineStage} on this pipeline rank of a HybridShardedOptimizer
 * with pipelineParallelSize p (or of any sharded optimizer, as a single stage), one batch per runBatch(): numMicroBatches
 * micro-batches (0: p) in the schedule's order, activations and their gradients sent between neighbouring stages, then one
 * optimizer step. Creation is collective over the pipeline group. An exception a stage throws fails runBatch on every
 * stage: this rank rethrows it, the others throw IllegalStateException naming it. Close the runner before its optimizer.
 * @param <A> the activation type: float[] (FLOAT32 parameters) or double[] (FLOAT64)
 */
public final class PipelineRunner<A> implements AutoCloseable {
    private final ShardedOptimizer<?, ?, ?> optimizer;
    private final SWIGTYPE_p_shardopt_optimizer_s optimizerHandle;
    private final Bridge bridge;
    /** 1F1B over p micro-batches. */
    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage) { this(optimizer, stage, 0, PipelineSchedule.ONE_F_ONE_B, 0); }
    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage, int numMicroBatches, PipelineSchedule schedule) {
        this(optimizer, stage, numMicroBatches, schedule, 0);
    }

    /** virtualStages: model chunks per rank, INTERLEAVED_1F1B only (0: the library's default). */
    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage, int numMicroBatches, PipelineSchedule schedule, int virtualStages) {
        this.optimizer = optimizer;
        this.optimizerHandle = optimizer.h();
        Precision precision = optimizer.getPrecision();
        Type declared = ShardedOptimizer.typeArgument(stage.getClass(), PipelineStage.class); // float[] or double[]: the parameters' type
        if (declared instanceof Class && declared != (precision == Precision.FLOAT32 ? float[].class : double[].class))
            throw new IllegalArgumentException("the stage is a PipelineStage<" + ((Class<?>) declared).getSimpleName() + ">, but the optimizer's "
                    + "parameters are " + precision + ": activations are " + (precision == Precision.FLOAT32 ? "float[]" : "double[]"));
        shardopt_pipeline_options o = new shardopt_pipeline_options();
        o.setNum_micro_batches(numMicroBatches);
        o.setSchedule(schedule.ordinal());
        o.setVirtual_stages(virtualStages);
        bridge = new Bridge(stage, optimizer, precision);
        bridge.pipe = shardopt_native.shardopt_pipeline_create(optimizerHandle, o);
    }

    public ShardedOptimizer<?, ?, ?> getOptimizer() { return optimizer; }
    /** Collective over the optimizer's world: one batch, one optimizer step. */
    public PipelineBatchResult runBatch() {
        if (bridge.pipe == 0) throw new IllegalStateException("the PipelineRunner was closed");
        if (optimizer.live() != optimizerHandle) throw new IllegalStateException("the PipelineRunner's optimizer was reset since the runner was made");
        shardopt_pipeline_result r = new shardopt_pipeline_result();
        bridge.failure = null;
        try {
            shardopt_native.shardopt_pipeline_run_batch(bridge, r);
            return new PipelineBatchResult(r);
        } catch (RuntimeException e) {
            throw bridge.rethrow(e);
        }
    }

    /** Releases the native pipeline (the library refuses from a stage); later runBatch calls throw IllegalStateException. */
    @Override public void close() {
        if (bridge.pipe != 0) shardopt_native.shardopt_pipeline_destroy(bridge);
        bridge.pipe = 0;
    }

    /** What the trampoline of shardopt_java.i calls: copies activations in and out (the stage never holds library memory)
     *  and checks what the stage returns. Its field pipe is the native pipeline. */
    static final class Bridge extends ShardedOptimizer.Callback {
        private final PipelineStage<Object> stage;
        private final ShardedOptimizer<?, ?, ?> optimizer;
        private final Precision precision;
        long pipe;
        @SuppressWarnings("unchecked")
        Bridge(PipelineStage<?> stage, ShardedOptimizer<?, ?, ?> optimizer, Precision precision) {
            this.stage = (PipelineStage<Object>) java.util.Objects.requireNonNull(stage, "stage");
            this.optimizer = optimizer;
            this.precision = precision;
        }

        /** A forward (output: the activation to fill) or a backward (output 0) of the call at address call. */
        double stage(long call, long output, long input, long n, long outputGrad, long outputGradCount, long inputGrad) {
            PipelineCall c = new PipelineCall(call, optimizer, precision);
            try {
                if (output == 0) return backward(c, stage.backward(c, read(input, n), read(outputGrad, outputGradCount)), inputGrad, n);
                Object out = stage.forward(c, read(input, n));
                String chunk = "forward of model chunk " + c.getModelChunk();
                if (c.isLast() && out != null && length(out, chunk) != 0) throw new IllegalArgumentException(chunk + " (the last) returned an output; it calls setLoss and returns null");
                if (c.isLast() && !c.lossSet()) throw new IllegalArgumentException(chunk + " (the last) did not call setLoss");
                if (c.isLast()) return c.loss();
                if (out == null) throw new IllegalArgumentException(chunk + " returned null; it must return its output activation");
                write(shardopt_nativeJNI.shardopt_activation_resize(output, length(out, "the output of model chunk " + c.getModelChunk())), out);
                return 0;
            } catch (RuntimeException | Error e) {
                throw failed(e);
            } finally {
                c.end();
            }
        }

        private double backward(PipelineCall c, Object gi, long inputGrad, long n) {
            String chunk = "backward of model chunk " + c.getModelChunk();
            if (c.isFirst() && gi != null && length(gi, chunk) != 0)
                throw new IllegalArgumentException(chunk + " (the first) returned an input gradient; the first chunk has no input: return null");
            if (c.isFirst()) return 0;
            if (gi == null) throw new IllegalArgumentException(chunk + " returned null; it must return the gradient of its input (" + n + " elements)");
            if (length(gi, "the input gradient of model chunk " + c.getModelChunk()) != n)
                throw new IllegalArgumentException(chunk + " returned " + length(gi, chunk) + " elements for an input of " + n);
            write(inputGrad, gi);
            return 0;
        }

        private Object read(long address, long n) {
            return ShardedOptimizer.read(shardopt_native.so_view(address, n * precision.size()).order(ByteOrder.nativeOrder()), precision, (int) n);
        }

        private void write(long address, Object a) {
            java.nio.ByteBuffer b = shardopt_native.so_view(address, (long) length(a, "an activation") * precision.size()).order(ByteOrder.nativeOrder());
            if (a instanceof float[]) b.asFloatBuffer().put((float[]) a); else b.asDoubleBuffer().put((double[]) a);
        }

        /** o's length, checked to be an array of the parameters' element type. */
        private int length(Object o, String what) {
            if (!(o instanceof float[] || o instanceof double[]) || Precision.of(o, null) != precision)
                throw new IllegalArgumentException(what + " is a " + o.getClass().getSimpleName() + ", but the optimizer's parameters are "
                        + precision + ": return a " + (precision == Precision.FLOAT32 ? "float[]" : "double[]"));
            return java.lang.reflect.Array.getLength(o);
        }
    }
}
