package org.shardopt;

import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.shardopt.internal.SWIGTYPE_p_shardopt_optimizer_s;
import org.shardopt.internal.SWIGTYPE_p_so_pipeline_s;
import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.so_pipeline_result;

/**
 * Pipeline parallelism (docs/pipeline.md): runs a {@link PipelineStage} on this pipeline rank of a
 * {@link HybridShardedOptimizer} with pipelineParallelSize p (or of any sharded optimizer, as a single stage),
 * one batch per {@link #runBatch()}: numMicroBatches micro-batches (0 = p) in the schedule's order, activations
 * and their gradients sent between neighbouring stages, the micro-batches' gradients summed, then exactly one
 * optimizer step on their mean.
 * <pre>
 * try (PipelineRunner&lt;double[]&gt; runner = new PipelineRunner&lt;&gt;(hybrid, myStage, 8, PipelineSchedule.ONE_F_ONE_B)) {
 *     PipelineBatchResult r = runner.runBatch();
 * }
 * </pre>
 * Creation is collective over the pipeline group (every stage passes the same options, else
 * IllegalStateException SHARDOPT_ERR_MISMATCH). Each chunk's output size per micro-batch is agreed with the next
 * stage on the first batch and must not change (IllegalStateException SHARDOPT_ERR_MISMATCH on every stage). An
 * exception thrown by a stage fails runBatch on every stage: this rank rethrows it, the others throw
 * IllegalStateException naming it. Close the runner before its optimizer.
 *
 * @param <A> the activation type: float[] (FLOAT32 parameters) or double[] (FLOAT64)
 */
public final class PipelineRunner<A> implements AutoCloseable {
    private final ShardedOptimizer<?, ?, ?> optimizer;
    private final SWIGTYPE_p_shardopt_optimizer_s optimizerHandle;
    private SWIGTYPE_p_so_pipeline_s pipe;
    private volatile Thread running;

    /** 1F1B over p micro-batches. */
    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage) {
        this(optimizer, stage, 0, PipelineSchedule.ONE_F_ONE_B, 0);
    }

    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage, int numMicroBatches,
                          PipelineSchedule schedule) {
        this(optimizer, stage, numMicroBatches, schedule, 0);
    }

    /** virtualStages: model chunks per rank, INTERLEAVED_1F1B only (0 = 2 there, 1 otherwise). */
    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage, int numMicroBatches,
                          PipelineSchedule schedule, int virtualStages) {
        if (optimizer == null) throw new NullPointerException("optimizer");
        if (stage == null) throw new NullPointerException("stage");
        if (schedule == null) throw new NullPointerException("schedule");
        if (numMicroBatches < 0) throw new IllegalArgumentException("numMicroBatches must be >= 0 (got " + numMicroBatches + ")");
        if (virtualStages < 0) throw new IllegalArgumentException("virtualStages must be >= 0 (got " + virtualStages + ")");
        SWIGTYPE_p_shardopt_optimizer_s h = optimizer.h();
        ParameterLayout.Precision precision = optimizer.getParameterLayout().getPrecision();
        checkDeclaredActivation(stage.getClass(), precision);
        this.optimizer = optimizer;
        this.optimizerHandle = h;
        pipe = shardopt_native.so_pipeline_create_java(h, new Bridge(stage, precision),
                                                       optimizer.getParameterLayout().elementSize(), numMicroBatches,
                                                       schedule.code, virtualStages);
    }

    public ShardedOptimizer<?, ?, ?> getOptimizer() { return optimizer; }

    /** Collective over the optimizer's world: one batch, one optimizer step. */
    public PipelineBatchResult runBatch() {
        if (pipe == null) throw new IllegalStateException("the PipelineRunner was closed");
        if (optimizer.h() != optimizerHandle)
            throw new IllegalStateException("the PipelineRunner's optimizer was reset since the runner was made");
        optimizer.nativeRun(Thread.currentThread());
        running = Thread.currentThread();
        so_pipeline_result r = new so_pipeline_result();
        try {
            shardopt_native.so_pipeline_run(pipe, r);
            return new PipelineBatchResult(r.getLoss(), r.getStep_applied() != 0, r.getBusy_seconds(), r.getWait_seconds(),
                                           r.getSpan_seconds(), r.getBubble_fraction(), r.getPeak_activations(),
                                           r.getSends(), r.getRecvs());
        } finally {
            running = null;
            optimizer.nativeRun(null);
            r.delete();
        }
    }

    /** Releases the native pipeline; later runBatch calls throw IllegalStateException. */
    @Override
    public void close() {
        if (running != null) throw new IllegalStateException("not while runBatch is running (called from a stage callback?)");
        if (pipe != null) {
            SWIGTYPE_p_so_pipeline_s p = pipe;
            pipe = null;
            shardopt_native.so_pipeline_destroy(p);
        }
    }

    /** A stage declared as PipelineStage&lt;float[]&gt; or &lt;double[]&gt; must match the parameters' precision. */
    private static void checkDeclaredActivation(Class<?> c, ParameterLayout.Precision precision) {
        Class<?> want = precision == ParameterLayout.Precision.FLOAT32 ? float[].class : double[].class;
        for (Class<?> k = c; k != null; k = k.getSuperclass()) {
            for (Type t : k.getGenericInterfaces()) {
                if (!(t instanceof ParameterizedType) || ((ParameterizedType) t).getRawType() != PipelineStage.class) continue;
                Type a = ((ParameterizedType) t).getActualTypeArguments()[0];
                if (a instanceof Class && a != want)
                    throw new IllegalArgumentException("the stage is a PipelineStage<" + ((Class<?>) a).getSimpleName()
                            + ">, but the optimizer's parameters are " + precision + ": activations are "
                            + want.getSimpleName());
                return;
            }
        }
    }

    /** What the JNI trampolines (pipeline.i) call: copies activations in and out, so the stage never holds
     *  library memory, and checks what it returns. It holds the stage, not the runner. */
    static final class Bridge {
        private final PipelineStage<Object> stage;
        private final ParameterLayout.Precision precision;
        private final boolean f32;

        @SuppressWarnings("unchecked")
        Bridge(PipelineStage<?> stage, ParameterLayout.Precision precision) {
            this.stage = (PipelineStage<Object>) stage;
            this.precision = precision;
            this.f32 = precision == ParameterLayout.Precision.FLOAT32;
        }

        public double forward(int microBatch, int chunk, int modelChunk, boolean first, boolean last, ByteBuffer input) {
            PipelineCall call = new PipelineCall(microBatch, chunk, modelChunk, first, last, precision);
            try {
                Object out = stage.forward(call, copyIn(input));
                if (last) {
                    if (out != null && length(out) != 0)
                        throw new IllegalArgumentException("forward of model chunk " + modelChunk
                                + " (the last) returned an output; the last chunk calls setLoss and returns null");
                    if (!call.lossSet())
                        throw new IllegalArgumentException("forward of model chunk " + modelChunk + " (the last) did not call setLoss");
                    return call.loss();
                }
                if (out == null)
                    throw new IllegalArgumentException("forward of model chunk " + modelChunk + " returned null; it must return its output activation");
                checkType(out, "the output of model chunk " + modelChunk);
                shardopt_native.so_stage_output(out, length(out));
                return 0.0;
            } finally {
                call.end();
            }
        }

        public void backward(int microBatch, int chunk, int modelChunk, boolean first, boolean last, ByteBuffer input,
                             ByteBuffer outputGradient, ByteBuffer inputGradient) {
            PipelineCall call = new PipelineCall(microBatch, chunk, modelChunk, first, last, precision);
            try {
                Object gi = stage.backward(call, copyIn(input), copyIn(outputGradient));
                int n = inputGradient.capacity() / (f32 ? 4 : 8);
                if (first) {
                    if (gi != null && length(gi) != 0)
                        throw new IllegalArgumentException("backward of model chunk " + modelChunk
                                + " (the first) returned an input gradient; the first chunk has no input: return null");
                    return;
                }
                if (gi == null)
                    throw new IllegalArgumentException("backward of model chunk " + modelChunk
                            + " returned null; it must return the gradient of its input (" + n + " elements)");
                checkType(gi, "the input gradient of model chunk " + modelChunk);
                if (length(gi) != n)
                    throw new IllegalArgumentException("backward of model chunk " + modelChunk + " returned " + length(gi)
                            + " elements for an input of " + n);
                ByteBuffer out = inputGradient.order(ByteOrder.nativeOrder());
                if (f32) out.asFloatBuffer().put((float[]) gi);
                else out.asDoubleBuffer().put((double[]) gi);
            } finally {
                call.end();
            }
        }

        private Object copyIn(ByteBuffer b) {
            ByteBuffer in = b.order(ByteOrder.nativeOrder());
            if (f32) {
                float[] a = new float[in.capacity() / 4];
                in.asFloatBuffer().get(a);
                return a;
            }
            double[] a = new double[in.capacity() / 8];
            in.asDoubleBuffer().get(a);
            return a;
        }

        private void checkType(Object o, String what) {
            if (f32 ? !(o instanceof float[]) : !(o instanceof double[]))
                throw new IllegalArgumentException(what + " is a " + o.getClass().getSimpleName() + ", but the optimizer's "
                        + "parameters are " + precision + ": return a " + (f32 ? "float[]" : "double[]"));
        }

        private static int length(Object o) {
            if (o instanceof float[]) return ((float[]) o).length;
            if (o instanceof double[]) return ((double[]) o).length;
            throw new IllegalArgumentException("activations are float[] or double[], not " + o.getClass().getSimpleName());
        }
    }
}
