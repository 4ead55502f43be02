package org.shardopt;

import java.io.IOException;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.shardopt.internal.SWIGTYPE_p_shardopt_optimizer_s;
import org.shardopt.internal.SWIGTYPE_p_shardopt_params_s;
import org.shardopt.internal.shardopt_memory_stats;
import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.shardopt_optimize_options;
import org.shardopt.internal.shardopt_optimize_result;
import org.shardopt.internal.shardopt_optimizer_options;
import org.shardopt.internal.shardopt_sharding_options;
import org.shardopt.internal.shardopt_step_result;
import org.shardopt.internal.shardopt_strategy;

/**
 * A sharded optimizer: wraps a base optimizer and runs it over the configuration's backend. The parameter
 * layout is given to the constructor or to {@link #initialize} (or taken from the wrapped optimizer's model
 * by {@link #optimize(OptimizationInputData)}); creation is collective and checked: ranks whose layouts or
 * options differ fail on every rank naming the first difference, and the initial parameters are rank 0's
 * unless {@link ShardingConfiguration#setBroadcastInitialParameters} is false. Parameters and gradients are
 * exposed as {@link NativeView}s over the library's memory, which throw IllegalStateException once the
 * optimizer is closed. Every array passed in is checked for its element type and length.
 */
public abstract class ShardedOptimizer<T, TInput, TOutput> implements IShardedOptimizer<T, TInput, TOutput> {
    static { NativeLoader.load(); }

    static final int DDP = shardopt_strategy.SHARDOPT_DDP, ZERO1 = shardopt_strategy.SHARDOPT_ZERO1,
        ZERO2 = shardopt_strategy.SHARDOPT_ZERO2, FSDP = shardopt_strategy.SHARDOPT_FSDP,
        HYBRID = shardopt_strategy.SHARDOPT_HYBRID, LOCAL_SGD = shardopt_strategy.SHARDOPT_LOCAL_SGD;
    private static final int SWITCH_ENABLE = 1, SWITCH_DISABLE = 2; // shardopt_switch

    private final Optimizer<T, TInput, TOutput> wrapped;
    private final ShardingConfiguration<T> config;
    private final int strategy;
    private SWIGTYPE_p_shardopt_optimizer_s handle;
    private ParameterLayout layout;
    private Buffer external; // the caller's parameter buffer, kept alive with the optimizer
    private Object initialCopy; // for reset()
    private Lifetime life = new Lifetime("an uninitialized optimizer");
    private Map<Integer, Lifetime> gathered; // FSDP units handed out by gather(), created on first use
    private double requestedLr = Double.NaN; // the options'/configuration's rate last given to the library

    protected ShardedOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, int strategy) {
        this(wrapped, config, strategy, 0.0);
    }

    /** checked: a value a subclass validated in its super(...) arguments, before configure() can see it. */
    ShardedOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, int strategy, double checked) {
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
        s.setBroadcast_initial(config.getBroadcastInitialParameters() ? SWITCH_ENABLE : SWITCH_DISABLE);
        if (config.getEnableGradientCompression()) s.setCompression(config.getGradientCompression().code);
        s.setCompression_ratio(config.getCompressionRatio());
        s.setPower_sgd_rank(config.getPowerSgdRank());
        s.setError_feedback(config.getErrorFeedback() ? SWITCH_ENABLE : SWITCH_DISABLE);
        s.setCpu_offload_optimizer(config.getCpuOffloadOptimizer() ? SWITCH_ENABLE : SWITCH_DISABLE);
        s.setCpu_offload_gradients(config.getCpuOffloadGradients() ? SWITCH_ENABLE : SWITCH_DISABLE);
        s.setCpu_offload_params(config.getCpuOffloadParams() ? SWITCH_ENABLE : SWITCH_DISABLE);
        configure(s);
        return s;
    }

    void configure(shardopt_sharding_options s) {}

    /** Subclasses' collective set-up of the native optimizer just created (ElasticOptimizer). */
    void created(SWIGTYPE_p_shardopt_optimizer_s x) {}

    /** Checks that data (float[], double[] or a direct Float/Double/ByteBuffer; null when allowed) holds
     *  exactly count (atLeast: at least count) elements of precision p. */
    static void checkData(Object data, long count, ParameterLayout.Precision p, String what, boolean atLeast) {
        if (data == null) throw new NullPointerException(what);
        long n;
        ParameterLayout.Precision got;
        if (data instanceof float[]) { n = ((float[]) data).length; got = ParameterLayout.Precision.FLOAT32; }
        else if (data instanceof double[]) { n = ((double[]) data).length; got = ParameterLayout.Precision.FLOAT64; }
        else if (data instanceof FloatBuffer) { n = ((FloatBuffer) data).remaining(); got = ParameterLayout.Precision.FLOAT32; }
        else if (data instanceof DoubleBuffer) { n = ((DoubleBuffer) data).remaining(); got = ParameterLayout.Precision.FLOAT64; }
        else if (data instanceof ByteBuffer) { n = ((ByteBuffer) data).remaining() / (p == ParameterLayout.Precision.FLOAT32 ? 4 : 8); got = p; }
        else throw new IllegalArgumentException(what + " must be a float[], double[] or a direct FloatBuffer/DoubleBuffer/ByteBuffer, not "
                + data.getClass().getName());
        if (data instanceof Buffer && !((Buffer) data).isDirect())
            throw new IllegalArgumentException(what + " must be a direct buffer (ByteBuffer.allocateDirect)");
        CommunicationBackend.nativeOrder(data, what);
        if (got != p)
            throw new IllegalArgumentException(what + " holds " + (got == ParameterLayout.Precision.FLOAT32 ? "float32" : "float64")
                    + " elements but the layout is " + (p == ParameterLayout.Precision.FLOAT32 ? "float32 (use float[] / FloatBuffer)" : "float64 (use double[] / DoubleBuffer)"));
        if (atLeast ? n < count : n != count)
            throw new IllegalArgumentException(what + " has " + n + " elements; the layout needs " + (atLeast ? "at least " : "") + count);
    }

    static Object native_(Object data) { return data instanceof Buffer ? CommunicationBackend.direct((Buffer) data) : data; }

    /** Collective: creates this rank's native optimizer. initial: float[]/double[]/direct buffer of the layout's
     *  element count and type, or null (zeros). */
    public ShardedOptimizer<T, TInput, TOutput> initialize(ParameterLayout layout, Object initial) { return initialize(layout, initial, null); }

    /** As {@link #initialize(ParameterLayout, Object)}, with the parameters kept in the caller's direct buffer of
     * {@link #paddedCountFor} elements (zero copy; DDP, ZeRO-1, ZeRO-2, Local SGD). */
    public ShardedOptimizer<T, TInput, TOutput> initialize(ParameterLayout layout, Object initial, Buffer parameters) {
        if (layout == null) throw new NullPointerException("layout");
        notWhileOptimizing();
        if (handle != null) throw new IllegalStateException("the optimizer is already initialized");
        if (initial != null) checkData(initial, layout.getElementCount(), layout.getPrecision(), "initial", false);
        if (parameters != null) {
            if (parameters instanceof ByteBuffer)
                throw new IllegalArgumentException("parameters must be a direct FloatBuffer or DoubleBuffer");
            checkData(parameters, paddedCountFor(layout), layout.getPrecision(), "parameters", true);
        }
        shardopt_optimizer_options opts = wrapped.options.copy();
        double lr = desiredLr();
        opts.setLr(lr);
        shardopt_sharding_options s = shardingOptions();
        SWIGTYPE_p_shardopt_params_s p = layout.toNative(config.getMinimumParameterGroupSize());
        try {
            Object init = initial == null ? null : native_(initial);
            if (parameters != null) {
                Buffer direct = CommunicationBackend.direct(parameters);
                handle = shardopt_native.so_optimizer_create_external(config.getCommunicationBackend().handle(), p, opts, s,
                        init, direct, parameters.remaining());
                external = direct;
            } else {
                handle = shardopt_native.so_optimizer_create(config.getCommunicationBackend().handle(), p, opts, s, init);
            }
            try {
                created(handle);
            } catch (RuntimeException | Error e) {
                SWIGTYPE_p_shardopt_optimizer_s x = handle;
                handle = null;
                external = null;
                shardopt_native.so_optimizer_destroy(x);
                throw e;
            }
            this.layout = layout;
            this.initialCopy = copyOf(initial);
            life = new Lifetime(getClass().getSimpleName() + "'s memory");
            requestedLr = lr;
        } finally {
            shardopt_native.so_params_destroy(p);
            opts.delete();
            s.delete();
        }
        return this;
    }

    private static Object copyOf(Object initial) {
        if (initial == null) return null;
        if (initial instanceof float[]) return ((float[]) initial).clone();
        if (initial instanceof double[]) return ((double[]) initial).clone();
        if (initial instanceof FloatBuffer) { FloatBuffer b = ((FloatBuffer) initial).duplicate(); float[] a = new float[b.remaining()]; b.get(a); return a; }
        if (initial instanceof DoubleBuffer) { DoubleBuffer b = ((DoubleBuffer) initial).duplicate(); double[] a = new double[b.remaining()]; b.get(a); return a; }
        ByteBuffer b = ((ByteBuffer) initial).duplicate();
        byte[] a = new byte[b.remaining()];
        b.get(a);
        return ByteBuffer.allocateDirect(a.length).put(a).flip();
    }

    /** AiDotNet's Reset(), collective: a fresh native optimizer (step 0, no optimizer state) from the layout and
     *  initial parameters given to initialize. Views of the old one become invalid. */
    public void reset() {
        ParameterLayout l = layout;
        Object init = initialCopy;
        if (l == null) throw new IllegalStateException("the optimizer is not initialized (or was closed)");
        if (external != null) throw new UnsupportedOperationException("reset() of an optimizer over the caller's parameter buffer");
        close();
        initialize(l, init);
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

    private volatile Thread optimizing; // the thread inside the native optimize(), if any

    /** h() for calls that change the optimizer or communicate: refused while optimize() runs (from the model
     *  callback or another thread), where they would destroy or corrupt what the training loop is using. */
    SWIGTYPE_p_shardopt_optimizer_s m() {
        notWhileOptimizing();
        return h();
    }

    /** PipelineRunner: a batch starts running natively on this optimizer on thread t (refused while optimize or
     *  another batch runs; the pending learning rate goes to the library first), or ended (t null). */
    void nativeRun(Thread t) {
        if (t != null) {
            notWhileOptimizing();
            applyRequestedLr();
        }
        pipelineRunning = t != null;
        optimizing = t;
    }
    private volatile boolean pipelineRunning;

    private void notWhileOptimizing() {
        Thread t = optimizing;
        if (t != null)
            throw new IllegalStateException("not while " + (pipelineRunning ? "a pipeline batch" : "optimize()")
                    + " is running on this optimizer (" + (t == Thread.currentThread()
                        ? (pipelineRunning ? "called from a stage callback" : "called from the model callback")
                        : "called from another thread") + ")");
    }

    public boolean isInitialized() { return handle != null; }
    public ParameterLayout getParameterLayout() { return layout; }
    @Override public int getRank() { return config.getCommunicationBackend().getRank(); }
    @Override public int getWorldSize() { return config.getCommunicationBackend().getWorldSize(); }
    @Override public Optimizer<T, TInput, TOutput> getWrappedOptimizer() { return wrapped; }
    @Override public ShardingConfiguration<T> getShardingConfiguration() { return config; }
    /** The wrapped optimizer's options: changing their LearningRate takes effect at the next step/optimize. */
    @Override public OptimizerOptions getOptions() { return wrapped.getOptions(); }
    @Override public void synchronizeOptimizerState() { shardopt_native.so_synchronize_state(m()); }
    /** Collective (every rank calls it): true on every rank when any rank voted to stop in the last
     *  optimize (its early stopping), as AiDotNet's Max-allreduce vote. */
    @Override public boolean shouldEarlyStop() { return shouldEarlyStop(stoppedEarly); }
    private boolean stoppedEarly;
    /** Collective: true on every rank when any rank votes true. */
    public boolean shouldEarlyStop(boolean vote) { return shardopt_native.so_should_early_stop(m(), vote ? 1 : 0) != 0; }

    @Override
    public OptimizationResult optimize(GradientModel model, OptimizationInputData<T, TInput, TOutput> input) {
        if (model == null) throw new NullPointerException("model");
        requirePrecision(ParameterLayout.Precision.FLOAT32);
        return run(new RawModel(model, null, null, layout.getPrecision()), input);
    }

    /** optimize() for a float64 layout (a separate name so lambdas stay unambiguous). */
    public OptimizationResult optimizeDouble(DoubleGradientModel model, OptimizationInputData<T, TInput, TOutput> input) {
        if (model == null) throw new NullPointerException("model");
        requirePrecision(ParameterLayout.Precision.FLOAT64);
        return run(new RawModel(null, model, null, layout.getPrecision()), input);
    }

    private void requirePrecision(ParameterLayout.Precision p) {
        h();
        if (layout.getPrecision() != p)
            throw new IllegalArgumentException("the layout is " + layout.getPrecision() + ", the model " + p
                    + (p == ParameterLayout.Precision.FLOAT32 ? " (use optimizeDouble)" : " (use optimize)"));
    }

    interface ViewModel { double call(NativeView params, NativeView grad, long[] samples); }

    /** The object the JNI trampoline calls: evaluate(ByteBuffer, ByteBuffer, ByteBuffer). The callback forms
     *  with java.nio buffers get copies in memory the JVM owns (a buffer kept after the call is stale, never
     *  dangling); the model form gets NativeViews that are invalidated when the call returns. */
    static final class RawModel {
        final GradientModel f;
        final DoubleGradientModel d;
        final ViewModel v;
        final ParameterLayout.Precision precision;
        private ByteBuffer pc, gc;

        RawModel(GradientModel f, DoubleGradientModel d, ViewModel v, ParameterLayout.Precision precision) {
            this.f = f; this.d = d; this.v = v; this.precision = precision;
        }

        public double evaluate(ByteBuffer params, ByteBuffer grad, ByteBuffer samples) {
            long[] s = new long[samples.capacity() / 8];
            samples.order(ByteOrder.nativeOrder()).asLongBuffer().get(s);
            if (v != null) {
                Lifetime l = new Lifetime("the model callback's parameters and gradient");
                try {
                    return v.call(new NativeView(params, precision, l), new NativeView(grad, precision, l), s);
                } finally {
                    l.invalidate("the model callback returned");
                }
            }
            if (pc == null || pc.capacity() != params.capacity()) {
                pc = ByteBuffer.allocateDirect(params.capacity()).order(ByteOrder.nativeOrder());
                gc = ByteBuffer.allocateDirect(grad.capacity()).order(ByteOrder.nativeOrder());
            }
            pc.clear(); pc.put(params); pc.clear();
            gc.clear(); gc.put(grad); gc.clear();
            double loss = f != null
                ? f.evaluate(pc.asFloatBuffer().asReadOnlyBuffer(), gc.asFloatBuffer(), LongBuffer.wrap(s))
                : d.evaluate(pc.asDoubleBuffer().asReadOnlyBuffer(), gc.asDoubleBuffer(), LongBuffer.wrap(s));
            grad.clear(); gc.clear(); grad.put(gc);
            return loss;
        }
    }

    private OptimizationResult run(RawModel raw, OptimizationInputData<T, TInput, TOutput> input) {
        if (input == null) throw new NullPointerException("input");
        boolean shuffle = input.shuffle != null && input.shuffle;
        return run(raw, input.numSamples, input.batchSize, input.epochs, input.maxIterations, input.patience,
                   input.minDelta, shuffle, input.seed);
    }

    private OptimizationResult run(RawModel raw, long numSamples, long batchSize, int epochs, long maxIterations,
                                   int patience, double minDelta, boolean shuffle, long seed) {
        applyRequestedLr();
        long n = getElementCount();
        boolean f32 = layout.getPrecision() == ParameterLayout.Precision.FLOAT32;
        Object best = f32 ? new float[(int) n] : new double[(int) n];
        double[] history = new double[Math.max(epochs, 1) + 1];
        shardopt_optimize_options o = new shardopt_optimize_options();
        shardopt_optimize_result r = new shardopt_optimize_result();
        try {
            shardopt_native.so_optimize_options_defaults(o);
            o.setNum_samples(numSamples);
            o.setBatch_size(batchSize);
            o.setEpochs(epochs);
            o.setMax_iterations(maxIterations);
            o.setPatience(patience);
            o.setMin_delta(minDelta);
            o.setShuffle(shuffle ? SWITCH_ENABLE : 0);
            o.setSeed(seed);
            SWIGTYPE_p_shardopt_optimizer_s x = m();
            optimizing = Thread.currentThread();
            try {
                shardopt_native.so_optimize_java(x, raw, layout.elementSize(), o, r, best, n, history, history.length);
            } finally {
                optimizing = null;
            }
            double[] h = java.util.Arrays.copyOf(history, (int) Math.min(r.getLoss_history_count(), history.length));
            stoppedEarly = r.getStopped_early() != 0;
            return new OptimizationResult(best, r.getBest_loss(), r.getIterations(), h, stoppedEarly);
        } finally {
            o.delete();
            r.delete();
        }
    }

    /**
     * AiDotNet's Optimize(inputData): trains the model the wrapped optimizer was constructed with on
     * XTrain/YTrain (collective: every rank calls it; each trains on its share of every batch). Creates the
     * native optimizer from the model's layout and parameters on first use. With validation data the best
     * solution is the epoch with the lowest validation loss (and early stopping watches it); the result
     * scores the best solution on the training, validation and test sets, and the model receives it.
     * Batch size, epochs (MaxIterations), shuffling, early stopping and the learning-rate schedule come from
     * the wrapped optimizer's options unless the input data sets them.
     */
    @Override
    public OptimizationResult optimize(OptimizationInputData<T, TInput, TOutput> input) {
        if (input == null) throw new NullPointerException("inputData");
        notWhileOptimizing();
        final IGradientModel<T, TInput, TOutput> model = wrapped.getModel();
        if (model == null) {
            if (input.numSamples > 0 && input.XTrain == null)
                throw new IllegalStateException("optimize(inputData) without a model: construct the wrapped optimizer with one "
                        + "(new AdamOptimizer<>(model, options)) or call optimize(GradientModel, inputData)");
            throw new IllegalStateException("the wrapped optimizer has no model: construct it as new "
                    + wrapped.getClass().getSimpleName() + "<>(model, options)");
        }
        if (input.XTrain == null || input.YTrain == null) throw new IllegalArgumentException("inputData needs XTrain and YTrain");
        if (handle == null) initialize(model.getParameterLayout(), model.getParameters());
        else if (model.getParameterLayout().getPrecision() != layout.getPrecision())
            throw new IllegalArgumentException("the model's layout is " + model.getParameterLayout().getPrecision()
                    + ", the optimizer's " + layout.getPrecision());
        OptimizerOptions oo = wrapped.getOptions();
        final TInput x = input.XTrain;
        final TOutput y = input.YTrain;
        long samples = model.getSampleCount(x);
        int epochs = input.epochs > 0 ? input.epochs : oo.getMaxIterations();
        long batch = input.batchSize > 0 ? input.batchSize : oo.getBatchSize();
        boolean shuffle = input.shuffle != null ? input.shuffle : oo.getShuffleData();
        long seed = input.shuffle != null ? input.seed : oo.getSeed();
        int patience = input.patience > 0 ? input.patience : oo.getUseEarlyStopping() ? oo.getEarlyStoppingPatience() : 0;
        double minDelta = input.patience > 0 ? input.minDelta : oo.getUseEarlyStopping() ? oo.getTolerance() : 0;
        boolean validation = input.XValidation != null && input.YValidation != null;
        LearningRateSchedule schedule = oo.getLearningRateSchedule();
        RawModel raw = new RawModel(null, null, (p, g, s) -> model.computeLossAndGradient(p, g, x, y, s), layout.getPrecision());
        OptimizationResult res;
        if (!validation && schedule == null) {
            res = run(raw, samples, batch, epochs, input.maxIterations, patience, minDelta, shuffle, seed);
        } else {
            // epoch by epoch: the schedule sets each epoch's rate, and the validation loss picks the best epoch.
            // (Shuffled epochs use seed + epoch as the seed of that epoch's permutation.)
            applyRequestedLr();
            double base = requestedLr;
            List<Double> hist = new ArrayList<>(), vhist = new ArrayList<>();
            Object best = null;
            double bestScore = Double.POSITIVE_INFINITY;
            long iterations = 0;
            int since = 0;
            boolean stopped = false;
            for (int e = 0; e < epochs; ++e) {
                if (schedule != null) setNativeLr(schedule.learningRate(e, base));
                long left = input.maxIterations > 0 ? input.maxIterations - iterations : 0;
                OptimizationResult r = run(raw, samples, batch, 1, left, 0, 0, shuffle, seed + e);
                iterations += r.getIterations();
                double[] h = r.getFitnessHistory();
                if (h.length == 0) { // an epoch an ElasticOptimizer's resume skipped
                    if (input.maxIterations > 0 && iterations >= input.maxIterations) break;
                    continue;
                }
                double trainLoss = h.length > 0 ? h[0] : r.getBestFitnessScore();
                hist.add(trainLoss);
                Object current = packedParameters();
                double score = trainLoss;
                if (validation) {
                    score = loss(model, current, input.XValidation, input.YValidation);
                    vhist.add(score);
                }
                if (best == null || score < bestScore - minDelta) { best = current; bestScore = score; since = 0; }
                else ++since;
                if (patience > 0 && shouldEarlyStop(since >= patience)) { stopped = true; break; }
                if (input.maxIterations > 0 && iterations >= input.maxIterations) break;
            }
            if (schedule != null) setNativeLr(base);
            stoppedEarly = stopped;
            res = new OptimizationResult(best, bestScore, iterations, hist.stream().mapToDouble(Double::doubleValue).toArray(), stopped);
            if (validation) res.validationHistory = vhist.stream().mapToDouble(Double::doubleValue).toArray();
        }
        Object best = res.getBestSolution();
        res.training = new OptimizationResult.DatasetResult(loss(model, best, x, y), samples);
        if (validation)
            res.validation = new OptimizationResult.DatasetResult(loss(model, best, input.XValidation, input.YValidation),
                                                                  model.getSampleCount(input.XValidation));
        if (input.XTest != null && input.YTest != null)
            res.test = new OptimizationResult.DatasetResult(loss(model, best, input.XTest, input.YTest), model.getSampleCount(input.XTest));
        model.setParameters(best instanceof float[] ? ((float[]) best).clone() : ((double[]) best).clone());
        return res;
    }

    /** The packed parameters as float[] or double[] (collective under FSDP). */
    public Object packedParameters() {
        return layout.getPrecision() == ParameterLayout.Precision.FLOAT32 ? getParametersFloat() : getParametersDouble();
    }

    /** The model's mean loss over all of (x, y) at packed parameters, on this rank (no communication). */
    private <I, O> double loss(IGradientModel<T, TInput, TOutput> model, Object params, TInput x, TOutput y) {
        long m = model.getSampleCount(x);
        if (m <= 0) return Double.NaN;
        long[] all = new long[(int) m];
        for (int i = 0; i < all.length; ++i) all[i] = i;
        int size = layout.elementSize();
        int n = params instanceof float[] ? ((float[]) params).length : ((double[]) params).length;
        ByteBuffer p = ByteBuffer.allocate(n * size).order(ByteOrder.nativeOrder());
        if (params instanceof float[]) p.asFloatBuffer().put((float[]) params); else p.asDoubleBuffer().put((double[]) params);
        ByteBuffer g = ByteBuffer.allocate(n * size).order(ByteOrder.nativeOrder());
        Lifetime l = new Lifetime("the scoring call's parameters and gradient");
        try {
            return model.computeLossAndGradient(new NativeView(p, layout.getPrecision(), l), new NativeView(g, layout.getPrecision(), l),
                                                x, y, all);
        } finally {
            l.invalidate("the scoring call returned");
        }
    }

    // ---- checkpoints (collective: every rank calls with the same arguments) ----
    /** The consolidated checkpoint (parameters, optimizer state, step count), identical on every rank. */
    @Override
    public byte[] serialize() throws IOException {
        long n = shardopt_native.so_serialize(m());
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
        shardopt_native.so_deserialize(m(), data, data.length);
    }

    /** Saves a sharded checkpoint (every rank writes its shard) into directory path, created if missing. */
    @Override
    public void saveModel(String path) throws IOException { saveModel(path, false); }

    /** Saves into directory path: sharded, or consolidated (rank 0 writes one file) when consolidated is true. */
    public void saveModel(String path, boolean consolidated) throws IOException {
        if (path == null) throw new NullPointerException("path");
        shardopt_native.so_save(m(), path, consolidated ? 1 : 0);
    }

    /** Loads a checkpoint of either form, saved by any strategy and world size; IOException when it is
     *  missing, unreadable or corrupt. */
    @Override
    public void loadModel(String path) throws IOException {
        if (path == null) throw new NullPointerException("path");
        shardopt_native.so_load(m(), path);
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
    private NativeView view(ByteBuffer b, Lifetime l) { return b == null ? null : new NativeView(b, layout.getPrecision(), l); }
    /** The full flat (padded) parameter buffer, a view; not for FSDP (sharded at rest). */
    public NativeView getParameters() { return view(shardopt_native.so_parameters(h(), layout.elementSize()), life); }
    public NativeView getTensorParameters(int tensor) { return view(shardopt_native.so_tensor_parameters(h(), tensor, layout.elementSize()), life); }
    /** Packed copy into out: a float[]/double[] (the layout's type) or a direct buffer of getElementCount() elements. */
    public void getParameters(Object out) {
        long n = getElementCount();
        checkData(out, n, layout.getPrecision(), "out", false);
        shardopt_native.so_get_parameters(m(), native_(out), n);
    }
    /** As {@link #getParameters(Object)}; count must be getElementCount(). */
    public void getParameters(Object out, long count) {
        long n = getElementCount();
        if (count != n) throw new IllegalArgumentException("count is " + count + "; the layout has " + n + " elements");
        getParameters(out);
    }
    public float[] getParametersFloat() {
        requireType(ParameterLayout.Precision.FLOAT32, "getParametersFloat");
        float[] a = new float[(int) getElementCount()]; getParameters(a); return a;
    }
    public double[] getParametersDouble() {
        requireType(ParameterLayout.Precision.FLOAT64, "getParametersDouble");
        double[] a = new double[(int) getElementCount()]; getParameters(a); return a;
    }
    private void requireType(ParameterLayout.Precision p, String what) {
        h();
        if (layout.getPrecision() != p) throw new IllegalArgumentException(what + ": the layout is " + layout.getPrecision());
    }
    /** Collective under FSDP: sets the packed parameters (the layout's type, getElementCount() elements). */
    public void setParameters(float[] values) { setParametersChecked(values); }
    public void setParameters(double[] values) { setParametersChecked(values); }
    public void setParameters(Buffer values) { setParametersChecked(values); }
    private void setParametersChecked(Object values) {
        if (values == null) throw new NullPointerException("values");
        long n = getElementCount();
        checkData(values, n, layout.getPrecision(), "values", false);
        shardopt_native.so_set_parameters(m(), native_(values), n);
    }
    /** FSDP: the unit's full parameters (collective), valid until release(bucket) or close. */
    public NativeView gather(int bucket) {
        ByteBuffer b = shardopt_native.so_gather(m(), bucket, layout.elementSize());
        Lifetime l = new Lifetime("FSDP unit " + bucket);
        if (gathered == null) gathered = new HashMap<>();
        Lifetime old = gathered.put(bucket, l);
        if (old != null) old.invalidate("the unit was gathered again");
        return view(b, l);
    }
    public void release(int bucket) {
        shardopt_native.so_release(m(), bucket);
        Lifetime l = gathered == null ? null : gathered.remove(bucket);
        if (l != null) l.invalidate("release(" + bucket + ") was called");
    }

    // ---- learning rate ----
    private double desiredLr() {
        return !Double.isNaN(config.getLearningRate()) ? config.getLearningRate() : wrapped.options.getLearningRate();
    }
    /** Passes a changed options'/configuration's learning rate on to the library. */
    private void applyRequestedLr() {
        double lr = desiredLr();
        if (handle != null && Double.compare(lr, requestedLr) != 0) {
            shardopt_native.so_set_learning_rate(handle, lr);
            requestedLr = lr;
        }
    }
    private void setNativeLr(double lr) { shardopt_native.so_set_learning_rate(m(), lr); }
    /** The rate the next step uses, read from the library: after setLearningRate, a load (the checkpoint's),
     *  or a change of getOptions().setLearningRate / the configuration's. */
    public double getLearningRate() {
        if (handle == null) return desiredLr();
        applyRequestedLr();
        return shardopt_native.so_learning_rate(handle);
    }
    public void setLearningRate(double lr) {
        m();
        applyRequestedLr();
        shardopt_native.so_set_learning_rate(m(), lr);
    }

    // ---- step protocol ----
    public long getStepCount() { return shardopt_native.so_step_count(h()); }
    public void zeroGrad() { shardopt_native.so_zero_grad(m()); }
    public NativeView getBucketGradient(int bucket) { return view(shardopt_native.so_bucket_grad(h(), bucket, layout.elementSize()), life); }
    public NativeView getTensorGradient(int tensor) { return view(shardopt_native.so_tensor_grad(h(), tensor, layout.elementSize()), life); }
    public void gradReady(int bucket) { shardopt_native.so_grad_ready(m(), bucket); }

    public StepResult step() {
        m();
        applyRequestedLr();
        shardopt_step_result r = new shardopt_step_result();
        try {
            shardopt_native.so_step(m(), r);
            return new StepResult(r.getApplied() != 0, r.getSkipped_nonfinite() != 0, r.getAccumulating() != 0, r.getGrad_norm(),
                                  r.getReduce_wait_seconds(), r.getUpdate_seconds(), r.getPost_update_seconds(),
                                  r.getBytes_sent());
        } finally {
            r.delete();
        }
    }

    /** Bytes this rank has moved over the optimizer's communicators since it was created (not collective). */
    public long getBytesSent() { return shardopt_native.so_bytes_sent(h()); }

    /** Bytes this rank holds now (not collective); compressionBytes: gradient compression's buffers. */
    public MemoryStats getMemoryStats() {
        shardopt_memory_stats m = new shardopt_memory_stats();
        try {
            shardopt_native.so_memory_stats(h(), m);
            return new MemoryStats(m.getParams_bytes(), m.getGrads_bytes(), m.getOptimizer_state_bytes(), m.getBuffer_bytes(),
                                   m.getPeak_buffer_bytes(), m.getTotal_bytes(), m.getCompression_bytes(),
                                   m.getHost_params_bytes(), m.getHost_grads_bytes(), m.getHost_optimizer_state_bytes(),
                                   m.getHost_total_bytes());
        } finally {
            m.delete();
        }
    }

    @Override
    public void close() {
        notWhileOptimizing();
        life.invalidate(getClass().getSimpleName() + " was closed");
        if (gathered != null) {
            for (Lifetime l : gathered.values()) l.invalidate(getClass().getSimpleName() + " was closed");
            gathered = null;
        }
        if (handle != null) {
            SWIGTYPE_p_shardopt_optimizer_s x = handle;
            handle = null;
            shardopt_native.so_optimizer_destroy(x);
        }
        external = null;
    }
}
