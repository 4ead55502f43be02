package org.shardopt;

import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.nio.ByteOrder;
import org.shardopt.ParameterLayout.Precision;
import org.shardopt.internal.*;

/**
 * Pipeline parallelism (docs/pipeline.md): runs a {@link PipelineStage} on this pipeline rank of a
 * {@link HybridShardedOptimizer} with pipelineParallelSize p (or of any sharded optimizer, as a single stage), one batch
 * per {@link #runBatch()}: numMicroBatches micro-batches (0 = p) in the schedule's order, activations and their gradients
 * sent between neighbouring stages, then one optimizer step on the mean of their gradients. Creation is collective over
 * the pipeline group. An exception thrown by a stage fails runBatch on every stage: this rank rethrows it, the others
 * throw IllegalStateException naming it. Close the runner before its optimizer.
 *
 * @param <A> the activation type: float[] (FLOAT32 parameters) or double[] (FLOAT64)
 */
public final class PipelineRunner<A> implements AutoCloseable {
    private final ShardedOptimizer<?, ?, ?> optimizer;
    private final SWIGTYPE_p_shardopt_optimizer_s optimizerHandle;
    private final Bridge bridge;
    private volatile Thread running;

    /** 1F1B over p micro-batches. */
    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage) { this(optimizer, stage, 0, PipelineSchedule.ONE_F_ONE_B, 0); }

    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage, int numMicroBatches, PipelineSchedule schedule) {
        this(optimizer, stage, numMicroBatches, schedule, 0);
    }

    /** virtualStages: model chunks per rank, INTERLEAVED_1F1B only (0: the library's default). */
    public PipelineRunner(ShardedOptimizer<?, ?, ?> optimizer, PipelineStage<A> stage, int numMicroBatches, PipelineSchedule schedule,
                          int virtualStages) {
        if (stage == null) throw new NullPointerException("stage");
        this.optimizer = optimizer;
        this.optimizerHandle = optimizer.h();
        Precision precision = optimizer.getPrecision();
        checkDeclaredActivation(stage.getClass(), precision);
        shardopt_pipeline_options o = new shardopt_pipeline_options();
        try {
            o.setNum_micro_batches(numMicroBatches);
            o.setSchedule(schedule.ordinal());
            o.setVirtual_stages(virtualStages);
            bridge = new Bridge(stage, optimizer, precision);
            bridge.pipe = shardopt_native.shardopt_pipeline_create(optimizerHandle, o);
        } finally {
            o.delete();
        }
    }

    public ShardedOptimizer<?, ?, ?> getOptimizer() { return optimizer; }

    /** Collective over the optimizer's world: one batch, one optimizer step. */
    public PipelineBatchResult runBatch() {
        if (bridge.pipe == 0) throw new IllegalStateException("the PipelineRunner was closed");
        if (optimizer.h() != optimizerHandle) throw new IllegalStateException("the PipelineRunner's optimizer was reset since the runner was made");
        optimizer.batch(Thread.currentThread());
        running = Thread.currentThread();
        shardopt_pipeline_result r = new shardopt_pipeline_result();
        bridge.failure = null;
        try {
            shardopt_native.shardopt_pipeline_run_batch(bridge, r);
            return new PipelineBatchResult(r);
        } catch (RuntimeException e) {
            if (bridge.failure instanceof Error) throw (Error) bridge.failure;
            throw bridge.failure != null ? (RuntimeException) bridge.failure : e;
        } finally {
            running = null;
            optimizer.batch(null);
            r.delete();
        }
    }

    /** Releases the native pipeline; later runBatch calls throw IllegalStateException. */
    @Override
    public void close() {
        if (running != null) throw new IllegalStateException("not while runBatch is running (called from a stage callback?)");
        if (bridge.pipe != 0) shardopt_native.shardopt_pipeline_destroy(bridge);
        bridge.pipe = 0;
    }

    /** A stage declared as PipelineStage&lt;float[]&gt; or &lt;double[]&gt; must match the parameters' precision. */
    private static void checkDeclaredActivation(Class<?> c, Precision precision) {
        Class<?> want = precision == Precision.FLOAT32 ? float[].class : double[].class;
        for (Class<?> k = c; k != null; k = k.getSuperclass())
            for (Type t : k.getGenericInterfaces()) {
                if (!(t instanceof ParameterizedType) || ((ParameterizedType) t).getRawType() != PipelineStage.class) continue;
                Type a = ((ParameterizedType) t).getActualTypeArguments()[0];
                if (a instanceof Class && a != want)
                    throw new IllegalArgumentException("the stage is a PipelineStage<" + ((Class<?>) a).getSimpleName() + ">, but the optimizer's "
                            + "parameters are " + precision + ": activations are " + want.getSimpleName());
                return;
            }
    }

    /** What the trampoline of shardopt_java.i calls: copies activations in and out (the stage never holds library memory)
     *  and checks what the stage returns. Its field pipe is the native pipeline. */
    static final class Bridge {
        private final PipelineStage<Object> stage;
        private final ShardedOptimizer<?, ?, ?> optimizer;
        private final Precision precision;
        long pipe;
        Throwable failure;

        @SuppressWarnings("unchecked")
        Bridge(PipelineStage<?> stage, ShardedOptimizer<?, ?, ?> optimizer, Precision precision) {
            this.stage = (PipelineStage<Object>) stage;
            this.optimizer = optimizer;
            this.precision = precision;
        }

        /** A forward (output != 0) or a backward of the call at address call. */
        double stage(long call, long output, long input, long count, long outputGrad, long outputGradCount, long inputGrad) {
            PipelineCall c = new PipelineCall(call, optimizer, precision);
            try {
                return output != 0 ? forward(c, output, read(input, count)) : backward(c, read(input, count), read(outputGrad, outputGradCount), inputGrad, count);
            } catch (RuntimeException | Error e) {
                shardopt_native.shardopt_model_error(e.toString());
                if (failure == null) failure = e;
                throw e;
            } finally {
                c.end();
            }
        }

        private double forward(PipelineCall c, long output, Object in) {
            Object out = stage.forward(c, in);
            String chunk = "forward of model chunk " + c.getModelChunk();
            if (c.isLast()) {
                if (out != null && length(out) != 0) throw new IllegalArgumentException(chunk + " (the last) returned an output; the last chunk calls setLoss and returns null");
                if (!c.lossSet()) throw new IllegalArgumentException(chunk + " (the last) did not call setLoss");
                return c.loss();
            }
            if (out == null) throw new IllegalArgumentException(chunk + " returned null; it must return its output activation");
            write(shardopt_nativeJNI.shardopt_activation_resize(output, length(checkType(out, "the output of model chunk " + c.getModelChunk()))), out);
            return 0;
        }

        private double backward(PipelineCall c, Object in, Object outputGrad, long inputGrad, long n) {
            Object gi = stage.backward(c, in, outputGrad);
            String chunk = "backward of model chunk " + c.getModelChunk();
            if (c.isFirst()) {
                if (gi != null && length(gi) != 0)
                    throw new IllegalArgumentException(chunk + " (the first) returned an input gradient; the first chunk has no input: return null");
                return 0;
            }
            if (gi == null) throw new IllegalArgumentException(chunk + " returned null; it must return the gradient of its input (" + n + " elements)");
            if (length(checkType(gi, "the input gradient of model chunk " + c.getModelChunk())) != n)
                throw new IllegalArgumentException(chunk + " returned " + length(gi) + " elements for an input of " + n);
            write(inputGrad, gi);
            return 0;
        }

        private Object read(long address, long n) {
            java.nio.ByteBuffer b = shardopt_native.so_view(address, n * precision.size()).order(ByteOrder.nativeOrder());
            if (precision == Precision.FLOAT32) { float[] a = new float[(int) n]; b.asFloatBuffer().get(a); return a; }
            double[] a = new double[(int) n];
            b.asDoubleBuffer().get(a);
            return a;
        }

        private void write(long address, Object a) {
            java.nio.ByteBuffer b = shardopt_native.so_view(address, (long) length(a) * precision.size()).order(ByteOrder.nativeOrder());
            if (a instanceof float[]) b.asFloatBuffer().put((float[]) a); else b.asDoubleBuffer().put((double[]) a);
        }

        private Object checkType(Object o, String what) {
            if (precision == Precision.FLOAT32 ? !(o instanceof float[]) : !(o instanceof double[]))
                throw new IllegalArgumentException(what + " is a " + o.getClass().getSimpleName() + ", but the optimizer's parameters are "
                        + precision + ": return a " + (precision == Precision.FLOAT32 ? "float[]" : "double[]"));
            return o;
        }

        private static int length(Object o) {
            if (o instanceof float[]) return ((float[]) o).length;
            if (o instanceof double[]) return ((double[]) o).length;
            throw new IllegalArgumentException("activations are float[] or double[], not " + o.getClass().getSimpleName());
        }
    }
}
