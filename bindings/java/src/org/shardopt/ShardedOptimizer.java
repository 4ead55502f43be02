package org.shardopt;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.nio.*;
import java.util.*;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import org.shardopt.NativeView.Lifetime;
import org.shardopt.ParameterLayout.Precision;
import org.shardopt.internal.*;

/**
 * A sharded optimizer (AiDotNet's ShardedOptimizerBase): the wrapped optimizer's rule over the configuration's backend.
 * Both optimize forms run the library's training loop (shardopt_optimizer_train) once, with the options' settings.
 * Creation is collective and checked (ranks whose layouts or options differ fail on every rank). Parameters and gradients
 * are {@link NativeView}s of the library's memory, which throw IllegalStateException once it is closed.
 */
public abstract class ShardedOptimizer<T, TInput, TOutput> implements IShardedOptimizer<T, TInput, TOutput> {
    static { NativeLoader.load(); }
    private final Optimizer<T, TInput, TOutput> wrapped;
    private final ShardingConfiguration<T> config;
    private boolean deviceMemory;
    private final Consumer<shardopt_sharding_options> strategy;
    private SWIGTYPE_p_shardopt_optimizer_s handle;
    private ParameterLayout layout;
    private Precision precision;
    private Object external; // the caller's parameters (a direct Buffer, kept alive with the optimizer, or a DeviceMemory)
    private Object initialCopy; // for reset()
    private Lifetime life = new Lifetime("an uninitialized optimizer");
    private final Map<Integer, Lifetime> gathered = new HashMap<>(); // FSDP units handed out by gather()
    private String closedBy;
    private boolean stoppedEarly;
    /** strategy: what the class sets in its copy of the configuration's options, checked now with them. */
    ShardedOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, Consumer<shardopt_sharding_options> strategy) {
        this.wrapped = Objects.requireNonNull(wrapped, "wrappedOptimizer");
        this.config = Objects.requireNonNull(config, "shardingConfiguration");
        this.strategy = strategy;
        options().delete();
    }

    static Consumer<shardopt_sharding_options> strategy(int s) { return o -> o.setStrategy(s); }
    private shardopt_sharding_options options() {
        shardopt_sharding_options s = new shardopt_sharding_options(config.options);
        strategy.accept(s);
        return s;
    }

    /** Subclasses' collective set-up of the native optimizer just created (ElasticOptimizer). */
    void created(SWIGTYPE_p_shardopt_optimizer_s x) {}
    /** The first n elements of b (a FloatBuffer or DoubleBuffer, or a ByteBuffer in native order) as a new array of p. */
    static Object read(Buffer b, Precision p, int n) {
        Object a = p.array(n);
        Buffer v = !(b instanceof ByteBuffer) ? b.duplicate() : p == Precision.FLOAT32 ? ((ByteBuffer) b).asFloatBuffer() : ((ByteBuffer) b).asDoubleBuffer();
        if (a instanceof float[]) ((FloatBuffer) v).get((float[]) a); else ((DoubleBuffer) v).get((double[]) a);
        return a;
    }

    /** Collective: creates this rank's native optimizer; initial (float[], double[], a direct buffer, or null for zeros)
     *  decides an element type the layout leaves open (none: FLOAT32). */
    public ShardedOptimizer<T, TInput, TOutput> initialize(ParameterLayout layout, Object initial) { return initialize(layout, initial, null, null); }
    /** The parameters kept in the caller's direct buffer of {@link #paddedCountFor} elements (zero copy; DDP, ZeRO-1/2, Local SGD). */
    public ShardedOptimizer<T, TInput, TOutput> initialize(ParameterLayout layout, Object initial, Buffer parameters) {
        return initialize(layout, initial, (Object) parameters, null);
    }
    /** Collective: the optimizer in {@link MemorySpace#CUDA} with its parameters in the caller's device memory of
     *  {@link #paddedCountFor} elements (DDP, ZeRO-1/2, Local SGD), updated in place; initial: the packed parameters written
     *  there (null: the memory holds them). Then parameters' stream waits for that ({@link #orderStream}). reset() re-creates
     *  the optimizer over the same memory. */
    public ShardedOptimizer<T, TInput, TOutput> initialize(ParameterLayout layout, Object initial, DeviceMemory parameters) {
        return initialize(layout, initial, Objects.requireNonNull(parameters, "parameters"), null);
    }

    private ShardedOptimizer<T, TInput, TOutput> initialize(ParameterLayout layout, Object initial, Object parameters, Precision modelT) {
        if (handle != null) throw new IllegalStateException("the optimizer is already initialized");
        DeviceMemory device = parameters instanceof DeviceMemory ? (DeviceMemory) parameters : null;
        if (parameters != null && device == null && config.getMemory() == MemorySpace.CUDA) // a direct buffer is host memory
            throw new IllegalArgumentException("parameters is host memory (a direct buffer), the optimizer's memory is CUDA device memory: "
                                               + "pass a DeviceMemory of its GPU, or leave parameters out (the library's own device memory)");
        if (device != null && config.getMemory() != MemorySpace.CUDA) // never read on the host
            throw new IllegalArgumentException("parameters is CUDA device memory (a DeviceMemory), the optimizer's memory is host memory: "
                                               + "setMemory(MemorySpace.CUDA) on the configuration, or pass a direct buffer");
        Precision given = layout.getPrecision(), p = modelT != null ? modelT : given != null ? given
                : Precision.of(initial, device != null ? device.getPrecision() : Precision.FLOAT32);
        if (given != null && given != p)
            throw new IllegalArgumentException("the model's T is " + (p == Precision.FLOAT64 ? "Double" : "Float") + " but its ParameterLayout is " + given
                    + ": use new ParameterLayout(), whose element type follows T, or new ParameterLayout(Precision." + p + ")");
        SWIGTYPE_p_shardopt_comm_s comm = config.getCommunicationBackend().handle(); // the typemaps check the arrays
        shardopt_optimizer_options o = wrapped.options.rule;
        deviceMemory = config.getMemory() == MemorySpace.CUDA; // the views of an optimizer in CUDA memory are device memory
        handle = withNative(layout, p, (ps, s) -> parameters == null
                ? shardopt_native.shardopt_optimizer_create(comm, ps, o, s, initial)
                : shardopt_native.shardopt_optimizer_create_external(comm, ps, o, s, initial, parameters));
        external = parameters;
        try {
            if (device != null) shardopt_native.shardopt_optimizer_order_stream(handle, device.getStream());
            created(handle);
        } catch (RuntimeException | Error e) {
            release();
            throw e;
        }

        this.layout = layout;
        this.precision = p;
        initialCopy = initial instanceof Buffer ? read((Buffer) initial, p, (int) layout.getElementCount())
                    : initial instanceof float[] ? ((float[]) initial).clone() : initial instanceof double[] ? ((double[]) initial).clone() : null;
        life = new Lifetime(getClass().getSimpleName() + "'s memory");
        closedBy = null;
        return this;
    }

    /** AiDotNet's Reset(), collective: a fresh native optimizer (step 0, no state) from the layout and initial parameters
     *  given to initialize. Views of the old one become invalid. */
    public void reset() {
        if (external instanceof Buffer) throw new UnsupportedOperationException("reset() of an optimizer over the caller's parameter buffer");
        Object device = external; // a DeviceMemory: the optimizer is re-created there
        h();
        release();
        initialize(layout, initialCopy, device, precision);
    }

    /** Elements a caller-owned parameter buffer needs for layout with this configuration. */
    public long paddedCountFor(ParameterLayout layout) {
        Precision p = layout.getPrecision() != null ? layout.getPrecision() : Precision.FLOAT32;
        return withNative(layout, p, (ps, s) -> shardopt_native.shardopt_params_padded_count_for(ps, s, getWorldSize()));
    }

    /** f of layout's native form (element type p) and this optimizer's sharding options, both freed after. */
    private <R> R withNative(ParameterLayout layout, Precision p,
                             BiFunction<SWIGTYPE_p_shardopt_params_s, shardopt_sharding_options, R> f) {
        shardopt_sharding_options s = options();
        SWIGTYPE_p_shardopt_params_s ps = layout.toNative(p);
        try {
            return f.apply(ps, s);
        } finally {
            shardopt_native.shardopt_params_destroy(ps);
            s.delete();
        }
    }

    SWIGTYPE_p_shardopt_optimizer_s h() {
        if (handle == null) throw new IllegalStateException("the optimizer is not initialized (or was closed)");
        return handle;
    }

    /** h(), whose rate became the options' learning rate if that changed since the library last took it (AiDotNet's
     *  getOptions().setLearningRate(x) applies from the next step: shardopt_optimizer_follow_options). */
    SWIGTYPE_p_shardopt_optimizer_s live() {
        shardopt_native.shardopt_optimizer_follow_options(h(), wrapped.options.rule);
        return handle;
    }

    public boolean isInitialized() { return handle != null; }
    public ParameterLayout getParameterLayout() { return layout; }
    /** The element type of the parameters, once initialized. */
    public Precision getPrecision() { return precision; }
    @Override public int getRank() { return config.getCommunicationBackend().getRank(); }
    @Override public int getWorldSize() { return config.getCommunicationBackend().getWorldSize(); }
    @Override public Optimizer<T, TInput, TOutput> getWrappedOptimizer() { return wrapped; }
    @Override public ShardingConfiguration<T> getShardingConfiguration() { return config; }
    @Override public OptimizerOptions<T, TInput, TOutput> getOptions() { return wrapped.getOptions(); }
    @Override public void synchronizeOptimizerState() { shardopt_native.shardopt_optimizer_synchronize_state(h()); }
    /** Collective: true on every rank when any rank's last optimize stopped early (AiDotNet's Max-allreduce vote). */
    @Override public boolean shouldEarlyStop() { return shouldEarlyStop(stoppedEarly); }
    /** Collective: true on every rank when any rank votes true. */
    public boolean shouldEarlyStop(boolean vote) { return shardopt_native.shardopt_optimizer_should_early_stop(h(), vote ? 1 : 0) != 0; }
    /** AiDotNet's Optimize(inputData), collective: trains the wrapped optimizer's model on XTrain/YTrain, scores
     *  XValidation/YValidation after each epoch when given, and the best solution on every set given; the model receives
     *  the best solution. The first call creates the native optimizer from the model (element type: the model's T). */
    @Override
    public OptimizationResult optimize(OptimizationInputData<T, TInput, TOutput> in) {
        Objects.requireNonNull(in, "inputData");
        if (closedBy != null) throw new IllegalStateException("optimize(inputData) after close(): " + closedBy + "; build a new optimizer");
        IGradientModel<T, TInput, TOutput> model = wrapped.getModel();
        if (model == null)
            throw new IllegalStateException("the wrapped optimizer has no model: construct it as new " + wrapped.getClass().getSimpleName()
                    + "<>(model, options), or call optimize(GradientModel, inputData)");
        if (in.XTrain == null || in.YTrain == null) throw new IllegalArgumentException("inputData needs XTrain and YTrain");
        if (wrapped.getOptions().getDeviceBatches())
            throw new IllegalStateException("deviceBatches: the library hands the model device memory, which the wrapped optimizer's "
                    + "IGradientModel (host arrays) cannot read; call optimize(GradientModel, inputData) with a model that works on the "
                    + "device, or leave deviceBatches off");
        ensure();
        boolean v = in.XValidation != null && in.YValidation != null, test = in.XTest != null && in.YTest != null;
        long[] sizes = {model.getSampleCount(in.XTrain), v ? model.getSampleCount(in.XValidation) : 0, test ? model.getSampleCount(in.XTest) : 0};
        OptimizationResult r = train((p, g, s, d) -> d == Dataset.TRAINING ? model.computeLossAndGradient(p, g, in.XTrain, in.YTrain, s)
                : d == Dataset.VALIDATION ? model.computeLossAndGradient(p, g, in.XValidation, in.YValidation, s)
                : model.computeLossAndGradient(p, g, in.XTest, in.YTest, s), sizes);
        model.setParameters(r.getBestSolution());
        return r;
    }

    /** The lower-level form, collective: model over sample indices into sets of in's numSamples, numValidationSamples and
     *  numTestSamples (the optimizer is initialized). */
    @Override
    public OptimizationResult optimize(GradientModel model, OptimizationInputData<T, TInput, TOutput> in) {
        return train(Objects.requireNonNull(model, "model"), new long[] {in.numSamples, in.numValidationSamples, in.numTestSamples});
    }

    /** The first type argument of generic interface iface as class c (or a superclass) binds it, or null. */
    static Type typeArgument(Class<?> c, Class<?> iface) {
        Map<Type, Type> bound = new HashMap<>(); // the superclasses' type variables, as their subclasses bind them
        for (Type k = c; k != null; ) {
            Class<?> raw = (Class<?>) (k instanceof ParameterizedType ? ((ParameterizedType) k).getRawType() : k);
            for (int i = 0; k instanceof ParameterizedType && i < raw.getTypeParameters().length; ++i)
                bound.put(raw.getTypeParameters()[i], ((ParameterizedType) k).getActualTypeArguments()[i]);
            for (Type t : raw.getGenericInterfaces())
                if (t instanceof ParameterizedType && ((ParameterizedType) t).getRawType() == iface) {
                    Type a = ((ParameterizedType) t).getActualTypeArguments()[0];
                    while (bound.containsKey(a)) a = bound.get(a);
                    return a;
                }
            k = raw.getGenericSuperclass();
        }

        return null;
    }

    /** h(), created first from the wrapped optimizer's model when there is one (optimize, deserialize and loadModel work
     *  on a new optimizer in AiDotNet's form). */
    private SWIGTYPE_p_shardopt_optimizer_s ensure() {
        IGradientModel<T, TInput, TOutput> model = wrapped.getModel();
        if (handle == null && closedBy == null && model != null)
        {
            Type t = typeArgument(model.getClass(), IGradientModel.class); // T: Double or Float
            initialize(model.getParameterLayout(), model.getParameters(), null, t == Double.class ? Precision.FLOAT64 : t == Float.class ? Precision.FLOAT32 : null);
        }

        return h();
    }

    /** What the trampolines of shardopt_java.i call: a Java exception is told to the library, so every rank's error names
     *  it, and kept to rethrow in place of the library's error naming it. */
    static class Callback {
        Throwable failure;
        RuntimeException failed(Throwable e) {
            shardopt_native.shardopt_model_error(e.toString());
            if (failure == null) failure = e;
            return rethrow(null);
        }

        RuntimeException rethrow(RuntimeException libraryError) {
            if (failure instanceof Error) throw (Error) failure;
            return failure != null ? (RuntimeException) failure : libraryError;
        }
    }

    /** The training loop's callbacks: the model (its views valid during the call) and a custom schedule's rule. */
    static final class Bridge extends Callback {
        private final GradientModel model;
        private final Precision precision;
        private final LearningRateSchedule.Rule rule;
        private final long params;
        Bridge(GradientModel model, Precision precision, LearningRateSchedule schedule, long params) {
            this.model = model;
            this.precision = precision;
            this.rule = schedule == null ? null : schedule.rule;
            this.params = params;
        }

        double batch(int dataset, long p, long g, long samples, long count, int epoch, long step, int device) {
            Lifetime l = new Lifetime("the model callback's arguments");
            try {
                long[] s = new long[(int) count];
                shardopt_native.so_view(samples, count * 8).order(ByteOrder.nativeOrder()).asLongBuffer().get(s);
                boolean dev = device >= 0; // device_batches: the optimizer's device memory
                return model.evaluate(new NativeView(p, params, precision, l, true, dev),
                                      g == 0 ? null : new NativeView(g, params, precision, l, false, dev), s, Dataset.values()[dataset]);
            } catch (RuntimeException | Error e) {
                throw failed(e);
            } finally {
                l.invalidate("the model callback returned");
            }
        }

        double learningRate(long t, double base) {
            try {
                return rule.rate(t, base);
            } catch (RuntimeException | Error e) {
                throw failed(e);
            }
        }
    }

    private OptimizationResult train(GradientModel model, long[] sizes) {
        SWIGTYPE_p_shardopt_optimizer_s x = live();
        OptimizerOptions<T, TInput, TOutput> oo = wrapped.getOptions();
        shardopt_training_options t = oo.run(oo.getLearningRateSchedule());
        shardopt_training_result r = new shardopt_training_result();
        try {
            t.setNum_samples(sizes[0]);
            t.setNum_validation_samples(sizes[1]);
            t.setNum_test_samples(sizes[2]);
            int cap = t.getMax_epochs(), n = (int) getElementCount();
            ByteBuffer best = direct(precision, n), h[] = {direct(Precision.FLOAT64, cap), direct(Precision.FLOAT64, cap), direct(Precision.FLOAT64, cap)};
            r.setBest_parameters(best);
            r.setBest_parameters_count(n);
            r.setTraining_loss_history(h[0]);
            r.setValidation_loss_history(h[1]);
            r.setLearning_rate_history(h[2]);
            r.setHistory_capacity(cap);
            Bridge b = new Bridge(model, precision, oo.getLearningRateSchedule(), n);
            try {
                shardopt_native.shardopt_optimizer_train(x, b, t, r);
            } catch (RuntimeException e) {
                throw b.rethrow(e);
            }

            double[][] hist = new double[3][];
            for (int k = 0; k < 3; ++k) hist[k] = (double[]) read(h[k], Precision.FLOAT64, Math.min(r.getEpochs(), cap));
            stoppedEarly = r.getStopped_early() != 0;
            return new OptimizationResult(read(best, precision, n), hist, r.getEpochs(), r.getSteps(), r.getBest_epoch(), r.getBest_score(), stoppedEarly, sizes,
                                          new double[] {r.getTraining_loss(), r.getValidation_loss(), r.getTest_loss()});
        } finally {
            t.delete();
            r.delete();
        }
    }

    /** A direct buffer for n elements of p in native order: what the library writes a training result into. */
    private static ByteBuffer direct(Precision p, long n) { return ByteBuffer.allocateDirect((int) n * p.size()).order(ByteOrder.nativeOrder()); }

    // ---- checkpoints (collective: every rank calls with the same arguments); a failed load changes nothing ----
    /** The consolidated checkpoint (parameters, optimizer state, step count), identical on every rank. */
    @Override public byte[] serialize() throws IOException { return shardopt_native.shardopt_optimizer_serialize(h()); }
    /** {@link #serialize()}'s bytes (but for the head's generation, new each time) written to out a window
     *  (SHARDOPT_CHECKPOINT_WINDOW_BYTES, 32 MiB) at a time, so no rank holds the whole checkpoint: a file, a socket.
     *  Collective; null: this rank wants no bytes (its parts still reach the others). An exception out throws ends
     *  the writes on its rank and, once the stream is over, is rethrown there; the other ranks throw IOException
     *  naming it. out is neither flushed nor closed. */
    public void serialize(OutputStream out) throws IOException {
        SWIGTYPE_p_shardopt_optimizer_s x = h();
        Writer w = out == null ? null : new Writer(out);
        try {
            shardopt_native.shardopt_optimizer_serialize_to(x, w);
        } catch (Throwable e) { // the library's error (its IOException thrown by JNI undeclared)
            if (w != null) w.rethrowFailure();
            throw e;
        }
    }

    /** serialize(OutputStream)'s writer: each piece of library memory copied into a reused array for out. */
    static final class Writer {
        private final OutputStream out;
        private byte[] buffer = new byte[0];
        private Throwable failure;
        Writer(OutputStream out) { this.out = out; }

        void write(long address, long size) throws IOException {
            try {
                if (buffer.length < size) buffer = new byte[Math.toIntExact(size)];
                shardopt_native.so_view(address, size).get(buffer, 0, (int) size);
                out.write(buffer, 0, (int) size);
            } catch (IOException | RuntimeException | Error e) {
                shardopt_native.shardopt_model_error(e.toString()); // every rank's error names it
                failure = e;
                throw e; // ends the call: the trampoline returns nonzero
            }
        }

        void rethrowFailure() throws IOException {
            if (failure instanceof IOException) throw (IOException) failure;
            if (failure instanceof RuntimeException) throw (RuntimeException) failure;
            if (failure instanceof Error) throw (Error) failure;
        }
    }

    /** Loads bytes from {@link #serialize}; IOException when they are corrupt, IllegalArgumentException for another layout. */
    @Override public void deserialize(byte[] data) throws IOException {
        ensure();
        ByteBuffer bytes = ByteBuffer.allocateDirect(data.length).put(data);
        shardopt_native.shardopt_optimizer_deserialize(live(), bytes, data.length); // the checkpoint's rate wins
    }

    /** Saves a sharded checkpoint (every rank writes its shard) into directory path, created if missing. */
    @Override public void saveModel(String path) throws IOException { saveModel(path, false); }
    /** consolidated: rank 0 writes one file (and model.safetensors). */
    public void saveModel(String path, boolean consolidated) throws IOException {
        shardopt_native.shardopt_optimizer_save(h(), Objects.requireNonNull(path, "path"), consolidated ? 1 : 0);
    }

    /** Loads a checkpoint of either form, of any strategy and world size; IOException when missing, unreadable or corrupt. */
    @Override public void loadModel(String path) throws IOException {
        ensure();
        shardopt_native.shardopt_optimizer_load(live(), Objects.requireNonNull(path, "path")); // the checkpoint's rate
    }

    // ---- layout and parameters ----
    public int getTensorCount() { return shardopt_native.shardopt_optimizer_tensor_count(h()); }
    public int getBucketCount() { return shardopt_native.shardopt_optimizer_bucket_count(h()); }
    public long getTensorSize(int tensor) { return shardopt_native.shardopt_optimizer_tensor_info(h(), tensor)[0]; }
    public int getTensorBucket(int tensor) { return (int) shardopt_native.shardopt_optimizer_tensor_info(h(), tensor)[1]; }
    public long getBucketSize(int bucket) { return shardopt_native.shardopt_optimizer_bucket_info(h(), bucket); }
    public long getElementCount() { return shardopt_native.shardopt_optimizer_element_count(h())[0]; }
    public long getPaddedCount() { return shardopt_native.shardopt_optimizer_element_count(h())[1]; }
    private NativeView view(long address, long count, Lifetime l) {
        return new NativeView(address, count, precision, l, false, deviceMemory);
    }
    /** The full flat (padded) parameter buffer; not for FSDP (sharded at rest). */
    public NativeView getParameters() { return view(shardopt_native.shardopt_optimizer_parameters(h()), getPaddedCount(), life); }
    public NativeView getTensorParameters(int t) { return view(shardopt_native.shardopt_optimizer_tensor_parameters(h(), t), getTensorSize(t), life); }
    /** Packed copy into out: a float[]/double[] (the layout's type) or a direct buffer of getElementCount() elements. */
    public void getParameters(Object out) { shardopt_native.shardopt_optimizer_get_parameters(h(), out); }

    /** As {@link #getParameters(Object)}; count must be getElementCount(). */
    public void getParameters(Object out, long count) {
        if (count != getElementCount()) throw new IllegalArgumentException("count is " + count + "; the layout has " + getElementCount() + " elements");
        getParameters(out);
    }

    public float[] getParametersFloat() { return (float[]) packed(Precision.FLOAT32, "getParametersFloat"); }
    public double[] getParametersDouble() { return (double[]) packed(Precision.FLOAT64, "getParametersDouble"); }
    /** The packed parameters as float[] or double[] (collective under FSDP). */
    public Object packedParameters() { return packed(precision, "packedParameters"); }
    private Object packed(Precision p, String what) {
        if (h() != null && precision != p) throw new IllegalArgumentException(what + ": the parameters are " + precision);
        Object a = p.array(getElementCount());
        getParameters(a);
        return a;
    }

    /** Collective under FSDP: sets the packed parameters (the layout's type, getElementCount() elements). */
    public void setParameters(float[] values) { shardopt_native.shardopt_optimizer_set_parameters(h(), values); }
    public void setParameters(double[] values) { shardopt_native.shardopt_optimizer_set_parameters(h(), values); }
    public void setParameters(Buffer values) { shardopt_native.shardopt_optimizer_set_parameters(h(), values); }

    /** FSDP: the unit's full parameters (collective), valid until release(bucket) or close. */
    public NativeView gather(int bucket) {
        long address = shardopt_native.shardopt_optimizer_gather(h(), bucket);
        Lifetime l = new Lifetime("FSDP unit " + bucket), old = gathered.put(bucket, l);
        if (old != null) old.invalidate("the unit was gathered again");
        return view(address, getBucketSize(bucket), l);
    }

    public void release(int bucket) {
        shardopt_native.shardopt_optimizer_release(h(), bucket);
        Lifetime l = gathered.remove(bucket);
        if (l != null) l.invalidate("release(" + bucket + ") was called");
    }

    // ---- learning rate and the step protocol ----
    /** The rate the next step uses (the options' or configuration's at creation, setLearningRate's, a checkpoint's, the
     *  options' again once changed). */
    public double getLearningRate() { return shardopt_native.shardopt_optimizer_learning_rate(live()); }
    public void setLearningRate(double lr) { shardopt_native.shardopt_optimizer_set_learning_rate(live(), lr); }
    public long getStepCount() { return shardopt_native.shardopt_optimizer_step_count(h()); }
    /** Where this optimizer's parameters, gradients and state are: the configuration's memory the library created it with. */
    public MemorySpace getMemory() { h(); return deviceMemory ? MemorySpace.CUDA : MemorySpace.HOST; }
    public void zeroGrad() { shardopt_native.shardopt_optimizer_zero_grad(h()); }
    public NativeView getBucketGradient(int bucket) { long[] g = shardopt_native.shardopt_optimizer_bucket_grad(h(), bucket); return view(g[0], g[1], life); }
    public NativeView getTensorGradient(int tensor) { long[] g = shardopt_native.shardopt_optimizer_tensor_grad(h(), tensor); return view(g[0], g[1], life); }
    public void gradReady(int bucket) { shardopt_native.shardopt_optimizer_grad_ready(h(), bucket); }
    public StepResult step() {
        shardopt_step_result r = new shardopt_step_result();
        try {
            shardopt_native.shardopt_optimizer_step(live(), r);
            return new StepResult(r);
        } finally {
            r.delete(); // at once: a step is frequent
        }
    }

    /** Makes the CUDA stream {@code stream} (a cudaStream_t as a long; 0: the legacy default stream) wait, on the device, for
     *  everything this optimizer enqueued so far (shardopt_optimizer_order_stream: an event recorded on its compute stream;
     *  the host never waits): call it before another CUDA library reads or writes the optimizer's device memory (a view's
     *  getDeviceAddress(), your DeviceMemory) on that stream. In host memory there is nothing to order. Not collective; an
     *  invalid stream is the CUDA runtime's error (IllegalArgumentException). */
    public void orderStream(long stream) { shardopt_native.shardopt_optimizer_order_stream(h(), stream); }

    /** Bytes this rank has moved over the optimizer's communicators since it was created (not collective). */
    public long getBytesSent() { return shardopt_native.shardopt_optimizer_bytes_sent(h()); }
    /** Bytes this rank holds now (not collective). */
    public MemoryStats getMemoryStats() {
        shardopt_memory_stats m = new shardopt_memory_stats();
        shardopt_native.shardopt_optimizer_memory_stats(h(), m);
        return new MemoryStats(m);
    }

    /** Frees the native optimizer (the library refuses, changing nothing, from its training loop or a pipeline batch). */
    private void release() {
        if (handle != null) shardopt_native.shardopt_optimizer_destroy(handle);
        handle = null;
        external = null;
        String why = getClass().getSimpleName() + " was closed";
        life.invalidate(why);
        gathered.values().forEach(l -> l.invalidate(why));
        gathered.clear();
    }

    /** Frees the native optimizer; its views, and a later optimize(inputData), throw IllegalStateException. */
    @Override public void close() {
        release();
        closedBy = getClass().getSimpleName() + " was closed";
    }
}
