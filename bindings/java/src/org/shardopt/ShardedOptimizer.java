package org.shardopt;

import java.io.IOException;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import org.shardopt.internal.SWIGTYPE_p_shardopt_optimizer_s;
import org.shardopt.internal.SWIGTYPE_p_shardopt_params_s;
import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.shardopt_optimize_options;
import org.shardopt.internal.shardopt_optimize_result;
import org.shardopt.internal.shardopt_optimizer_options;
import org.shardopt.internal.shardopt_sharding_options;
import org.shardopt.internal.shardopt_step_result;
import org.shardopt.internal.shardopt_strategy;

/**
 * A sharded optimizer: wraps a base optimizer and runs it over the configuration's backend. The parameter
 * layout is given to the constructor or to {@link #initialize}; both are collective (every rank, same layout
 * and initial values). Parameters and gradients are exposed as direct buffers over the library's memory.
 */
public abstract class ShardedOptimizer implements IShardedOptimizer {
    static { NativeLoader.load(); }

    static final int DDP = shardopt_strategy.SHARDOPT_DDP, ZERO1 = shardopt_strategy.SHARDOPT_ZERO1,
        ZERO2 = shardopt_strategy.SHARDOPT_ZERO2, FSDP = shardopt_strategy.SHARDOPT_FSDP,
        HYBRID = shardopt_strategy.SHARDOPT_HYBRID, LOCAL_SGD = shardopt_strategy.SHARDOPT_LOCAL_SGD;

    private final Optimizer wrapped;
    private final ShardingConfiguration config;
    private final int strategy;
    private SWIGTYPE_p_shardopt_optimizer_s handle;
    private ParameterLayout layout;
    private Buffer external; // the caller's parameter buffer, kept alive with the optimizer
    private double learningRate;

    protected ShardedOptimizer(Optimizer wrapped, ShardingConfiguration config, int strategy) {
        if (wrapped == null) throw new NullPointerException("wrappedOptimizer");
        if (config == null) throw new NullPointerException("shardingConfiguration");
        this.wrapped = wrapped;
        this.config = config;
        this.strategy = strategy;
        shardingOptions().delete(); // validate the configuration now
    }

    shardopt_sharding_options shardingOptions() {
        shardopt_sharding_options s = new shardopt_sharding_options();
        shardopt_native.so_sharding_options_defaults(s);
        s.setStrategy(strategy);
        if (!config.getAutoSyncGradients()) {
            if (strategy != DDP && strategy != ZERO1 && strategy != LOCAL_SGD) {
                s.delete();
                throw new IllegalArgumentException("AutoSyncGradients=false (Local SGD) needs replicated parameters; "
                        + getClass().getSimpleName() + " reduces gradients every step");
            }
            s.setStrategy(LOCAL_SGD);
        }
        s.setLocal_sgd_period(config.getLocalSteps());
        s.setGradient_accumulation_steps(config.getGradientAccumulationSteps());
        s.setMax_grad_norm(config.getMaxGradNorm());
        configure(s);
        return s;
    }

    void configure(shardopt_sharding_options s) {}

    /** Collective: creates this rank's native optimizer. initial: float[]/double[]/direct buffer or null. */
    public ShardedOptimizer initialize(ParameterLayout layout, Object initial) { return initialize(layout, initial, null); }

    /** As {@link #initialize(ParameterLayout, Object)}, with the parameters kept in the caller's direct buffer of
     * {@link #paddedCountFor} elements (zero copy; DDP, ZeRO-1, ZeRO-2, Local SGD). */
    public ShardedOptimizer initialize(ParameterLayout layout, Object initial, Buffer parameters) {
        if (layout == null) throw new NullPointerException("layout");
        if (handle != null) throw new IllegalStateException("the optimizer is already initialized");
        shardopt_optimizer_options opts = wrapped.options.copy();
        if (!Double.isNaN(config.getLearningRate())) opts.setLr(config.getLearningRate());
        shardopt_sharding_options s = shardingOptions();
        SWIGTYPE_p_shardopt_params_s p = layout.toNative(config.getMinimumParameterGroupSize());
        try {
            if (parameters != null) {
                Buffer direct = CommunicationBackend.direct(parameters);
                handle = shardopt_native.so_optimizer_create_external(config.getCommunicationBackend().handle(), p, opts, s,
                        initial, direct, parameters.remaining());
                external = direct;
            } else {
                handle = shardopt_native.so_optimizer_create(config.getCommunicationBackend().handle(), p, opts, s, initial);
            }
            this.layout = layout;
            learningRate = opts.getLr();
        } finally {
            shardopt_native.so_params_destroy(p);
            opts.delete();
            s.delete();
        }
        return this;
    }

    /** Elements a caller-owned parameter buffer needs for layout on this backend. */
    public long paddedCountFor(ParameterLayout layout) {
        SWIGTYPE_p_shardopt_params_s p = layout.toNative(config.getMinimumParameterGroupSize());
        try {
            return shardopt_native.so_params_padded_count(p, getWorldSize());
        } finally {
            shardopt_native.so_params_destroy(p);
        }
    }

    SWIGTYPE_p_shardopt_optimizer_s h() {
        if (handle == null) throw new IllegalStateException("the optimizer is not initialized (or was closed)");
        return handle;
    }

    public boolean isInitialized() { return handle != null; }
    @Override public int getRank() { return config.getCommunicationBackend().getRank(); }
    @Override public int getWorldSize() { return config.getCommunicationBackend().getWorldSize(); }
    @Override public Optimizer getWrappedOptimizer() { return wrapped; }
    @Override public ShardingConfiguration getShardingConfiguration() { return config; }
    @Override public OptimizerOptions getOptions() { return wrapped.getOptions(); }
    @Override public void synchronizeOptimizerState() { shardopt_native.so_synchronize_state(h()); }
    @Override public boolean shouldEarlyStop() { return shouldEarlyStop(false); }
    /** Collective: true on every rank when any rank votes true. */
    public boolean shouldEarlyStop(boolean vote) { return shardopt_native.so_should_early_stop(h(), vote ? 1 : 0) != 0; }

    @Override
    public OptimizationResult optimize(GradientModel model, OptimizationInputData input) {
        if (model == null) throw new NullPointerException("model");
        requirePrecision(ParameterLayout.Precision.FLOAT32);
        return run(new RawModel(model, null), input);
    }

    /** optimize() for a float64 layout (a separate name so lambdas stay unambiguous). */
    public OptimizationResult optimizeDouble(DoubleGradientModel model, OptimizationInputData input) {
        if (model == null) throw new NullPointerException("model");
        requirePrecision(ParameterLayout.Precision.FLOAT64);
        return run(new RawModel(null, model), input);
    }

    private void requirePrecision(ParameterLayout.Precision p) {
        h();
        if (layout.getPrecision() != p)
            throw new IllegalArgumentException("the layout is " + layout.getPrecision() + ", the model " + p);
    }

    /** The object the JNI trampoline calls: evaluate(ByteBuffer, ByteBuffer, ByteBuffer). */
    static final class RawModel {
        final GradientModel f;
        final DoubleGradientModel d;

        RawModel(GradientModel f, DoubleGradientModel d) { this.f = f; this.d = d; }

        public double evaluate(ByteBuffer params, ByteBuffer grad, ByteBuffer samples) {
            params.order(ByteOrder.nativeOrder());
            grad.order(ByteOrder.nativeOrder());
            LongBuffer s = samples.order(ByteOrder.nativeOrder()).asLongBuffer();
            if (f != null) return f.evaluate(params.asFloatBuffer().asReadOnlyBuffer(), grad.asFloatBuffer(), s);
            return d.evaluate(params.asDoubleBuffer().asReadOnlyBuffer(), grad.asDoubleBuffer(), s);
        }
    }

    private OptimizationResult run(RawModel raw, OptimizationInputData input) {
        if (input == null) throw new NullPointerException("input");
        long n = getElementCount();
        boolean f32 = layout.getPrecision() == ParameterLayout.Precision.FLOAT32;
        Object best = f32 ? new float[(int) n] : new double[(int) n];
        double[] history = new double[Math.max(input.epochs, 1) + 1];
        shardopt_optimize_options o = new shardopt_optimize_options();
        shardopt_optimize_result r = new shardopt_optimize_result();
        try {
            shardopt_native.so_optimize_options_defaults(o);
            o.setNum_samples(input.numSamples);
            o.setBatch_size(input.batchSize);
            o.setEpochs(input.epochs);
            o.setMax_iterations(input.maxIterations);
            o.setPatience(input.patience);
            o.setMin_delta(input.minDelta);
            shardopt_native.so_optimize_java(h(), raw, layout.elementSize(), o, r, best, n, history, history.length);
            double[] h = java.util.Arrays.copyOf(history, (int) Math.min(r.getLoss_history_count(), history.length));
            return new OptimizationResult(best, r.getBest_loss(), r.getIterations(), h, r.getStopped_early() != 0);
        } finally {
            o.delete();
            r.delete();
        }
    }

    // ---- checkpoints (collective: every rank calls with the same arguments) ----
    /** The consolidated checkpoint (parameters, optimizer state, step count), identical on every rank. */
    @Override
    public byte[] serialize() throws IOException {
        long n = shardopt_native.so_serialize(h());
        if (n > Integer.MAX_VALUE - 8) {
            shardopt_native.so_serialized_discard();
            throw new OutOfMemoryError("the checkpoint (" + n + " bytes) does not fit in a Java array");
        }
        byte[] out;
        try {
            out = new byte[(int) n];
        } catch (Throwable t) {
            shardopt_native.so_serialized_discard();
            throw t;
        }
        shardopt_native.so_serialized_take(out, n);
        return out;
    }

    /** Loads bytes from {@link #serialize} (every rank the same bytes); IOException when they are corrupt,
     *  IllegalArgumentException for another layout. A failed load changes nothing. */
    @Override
    public void deserialize(byte[] data) throws IOException {
        if (data == null) throw new NullPointerException("data");
        shardopt_native.so_deserialize(h(), data, data.length);
    }

    /** Saves a sharded checkpoint (every rank writes its shard) into directory path, created if missing. */
    @Override
    public void saveModel(String path) throws IOException { saveModel(path, false); }

    /** Saves into directory path: sharded, or consolidated (rank 0 writes one file) when consolidated is true. */
    public void saveModel(String path, boolean consolidated) throws IOException {
        if (path == null) throw new NullPointerException("path");
        shardopt_native.so_save(h(), path, consolidated ? 1 : 0);
    }

    /** Loads a checkpoint of either form, saved by any strategy and world size; IOException when it is
     *  missing, unreadable or corrupt. */
    @Override
    public void loadModel(String path) throws IOException {
        if (path == null) throw new NullPointerException("path");
        shardopt_native.so_load(h(), path);
    }

    // ---- layout ----
    public int getTensorCount() { return shardopt_native.so_tensor_count(h()); }
    public int getBucketCount() { return shardopt_native.so_bucket_count(h()); }
    public long getTensorSize(int tensor) { return shardopt_native.so_tensor_size(h(), tensor); }
    public int getTensorBucket(int tensor) { return shardopt_native.so_tensor_bucket(h(), tensor); }
    public long getBucketSize(int bucket) { return shardopt_native.so_bucket_size(h(), bucket); }
    public long getElementCount() { return shardopt_native.so_element_count(h()); }
    public long getPaddedCount() { return shardopt_native.so_padded_count(h()); }

    // ---- parameters ----
    private ByteBuffer ordered(ByteBuffer b) { return b == null ? null : b.order(ByteOrder.nativeOrder()); }
    /** The full flat (padded) parameter buffer, a view; not for FSDP (sharded at rest). */
    public ByteBuffer getParameters() { return ordered(shardopt_native.so_parameters(h(), layout.elementSize())); }
    public ByteBuffer getTensorParameters(int tensor) { return ordered(shardopt_native.so_tensor_parameters(h(), tensor, layout.elementSize())); }
    /** Packed copy into out (float[], double[] or a direct buffer of getElementCount() elements). */
    public void getParameters(Object out, long count) { shardopt_native.so_get_parameters(h(), out, count); }
    public float[] getParametersFloat() { float[] a = new float[(int) getElementCount()]; getParameters(a, a.length); return a; }
    public double[] getParametersDouble() { double[] a = new double[(int) getElementCount()]; getParameters(a, a.length); return a; }
    public void setParameters(float[] values) { shardopt_native.so_set_parameters(h(), values, values.length); }
    public void setParameters(double[] values) { shardopt_native.so_set_parameters(h(), values, values.length); }
    /** FSDP: the unit's full parameters (collective), valid until release(bucket). */
    public ByteBuffer gather(int bucket) { return ordered(shardopt_native.so_gather(h(), bucket, layout.elementSize())); }
    public void release(int bucket) { shardopt_native.so_release(h(), bucket); }

    // ---- step protocol ----
    public double getLearningRate() { return learningRate; }
    public void setLearningRate(double lr) { shardopt_native.so_set_learning_rate(h(), lr); learningRate = lr; }
    public long getStepCount() { return shardopt_native.so_step_count(h()); }
    public void zeroGrad() { shardopt_native.so_zero_grad(h()); }
    public ByteBuffer getBucketGradient(int bucket) { return ordered(shardopt_native.so_bucket_grad(h(), bucket, layout.elementSize())); }
    public ByteBuffer getTensorGradient(int tensor) { return ordered(shardopt_native.so_tensor_grad(h(), tensor, layout.elementSize())); }
    public void gradReady(int bucket) { shardopt_native.so_grad_ready(h(), bucket); }

    public StepResult step() {
        shardopt_step_result r = new shardopt_step_result();
        try {
            shardopt_native.so_step(h(), r);
            return new StepResult(r.getApplied() != 0, r.getSkipped_nonfinite() != 0, r.getAccumulating() != 0, r.getGrad_norm(),
                                  r.getReduce_wait_seconds(), r.getUpdate_seconds(), r.getPost_update_seconds());
        } finally {
            r.delete();
        }
    }

    @Override
    public void close() {
        if (handle != null) {
            SWIGTYPE_p_shardopt_optimizer_s x = handle;
            handle = null;
            shardopt_native.so_optimizer_destroy(x);
        }
        external = null;
    }
}
