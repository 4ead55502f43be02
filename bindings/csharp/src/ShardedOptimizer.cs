// The sharded optimizer over an optimizer handle of the C ABI: creation, Optimize (shardopt_optimizer_train), checkpoints,
// parameters and the step protocol, with views of the library's memory.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>The model's tensors in order (their element type is the optimizer's). EndBucket() closes a gradient bucket (an
    /// FSDP unit); ShardingConfiguration.MinimumParameterGroupSize groups the rest. AddMatrix declares a row-major matrix:
    /// the tensors PowerSGD compression approximates.</summary>
    public sealed class ParameterLayout
    {
        readonly List<(string name, long rows, long cols, bool tp, bool end)> tensors = new List<(string, long, long, bool, bool)>();
        public ParameterLayout Add(string name, long count, bool tensorParallelReplicated = false) => AddMatrix(name, count, 0, tensorParallelReplicated);
        public ParameterLayout AddMatrix(string name, long rows, long cols, bool tensorParallelReplicated = false)
        {
            if (name == null) throw new ArgumentNullException(nameof(name));
            if (rows < 1 || cols < 0) // counts cross as size_t, where a negative one would wrap
                throw new ArgumentOutOfRangeException(rows < 1 ? nameof(rows) : nameof(cols), $"tensor '{name}' must have at least 1 {(cols == 0 ? "element" : rows < 1 ? "row" : "column")} (got {(rows < 1 ? rows : cols)})");
            tensors.Add((name, rows, cols, tensorParallelReplicated, false));
            return this;
        }
        public ParameterLayout EndBucket() { if (tensors.Count > 0) { var t = tensors[tensors.Count - 1]; t.end = true; tensors[tensors.Count - 1] = t; } return this; }
        public int TensorCount => tensors.Count;
        public long ElementCount => tensors.Sum(t => t.cols == 0 ? t.rows : t.rows * t.cols);
        internal SWIGTYPE_p_shardopt_params_s ToNative(int dtype)
        {
            shardopt_params_create(dtype, 0, out var p);
            try
            {
                int index;
                foreach (var t in tensors)
                {
                    if (t.cols == 0) shardopt_params_add(p, t.name, (ulong)t.rows, t.tp ? 1 : 0, out index); else shardopt_params_add_matrix(p, t.name, (ulong)t.rows, (ulong)t.cols, t.tp ? 1 : 0, out index);
                    if (t.end) shardopt_params_end_bucket(p);
                }
                return p;
            }
            catch { shardopt_params_destroy(p); throw; }
        }
    }

    /// <summary>A view of library memory (parameters, a gradient bucket, a gathered FSDP unit). It checks every access: after
    /// its optimizer is disposed, or once the memory may move (gradient views after GradReady, ZeroGrad, Step; gathered
    /// views after Release or Step), it throws ObjectDisposedException instead of touching freed memory. Of an optimizer in
    /// CUDA memory (IsDevice) it is device memory: the element accessors throw InvalidOperationException (a host read
    /// would crash), and DevicePointer (checked as above), Length, DeviceId and CudaStream (the optimizer's compute stream,
    /// which your work on it must be ordered after: OrderStream(yourStream) does it) hand it to a CUDA library.</summary>
    public sealed class NativeView<T> where T : struct
    {
        readonly ShardedOptimizer owner;
        readonly long epoch; // -1: lives as long as the optimizer
        readonly IntPtr ptr;
        internal NativeView(ShardedOptimizer owner, IntPtr ptr, long length, bool transient)
        {
            this.owner = owner; this.ptr = ptr; Length = (int)length; epoch = transient ? owner.ViewEpoch : -1;
            shardopt_optimizer_device(owner.H, out int memory, out int device, out IntPtr stream);
            IsDevice = memory == SHARDOPT_MEMORY_CUDA; DeviceId = device; CudaStream = stream;
        }
        public int Length { get; }
        public bool IsValid => owner.ViewValid(epoch);
        public bool IsDevice { get; }
        /// <summary>The CUDA device of a device view; -1 for host memory.</summary>
        public int DeviceId { get; }
        public IntPtr CudaStream { get; }
        /// <summary>The device address of a device view (InvalidOperationException for a host view: use the accessors).</summary>
        public IntPtr DevicePointer
        {
            get
            {
                owner.CheckView(epoch);
                return IsDevice ? ptr : throw new InvalidOperationException("this view is host memory: use its indexer, CopyTo or CopyFrom");
            }
        }
        /// <summary>Makes `stream` wait for the optimizer's work so far before you use this view there (ShardedOptimizer.OrderStream).</summary>
        public void OrderStream(IntPtr stream) { owner.CheckView(epoch); owner.OrderStream(stream); }
        unsafe Span<T> Live()
        {
            owner.CheckView(epoch);
            if (IsDevice) throw new InvalidOperationException($"this view is CUDA device memory of device {DeviceId}: it cannot be read on the host; pass DevicePointer to a CUDA library, or use GetParameters for a host copy");
            return new Span<T>((void*)ptr, Length);
        }
        int Index(int i) => (uint)i < (uint)Length ? i : throw new IndexOutOfRangeException($"index {i} of a view of {Length} elements");
        public T this[int index] { get => Live()[Index(index)]; set { var s = Live(); s[Index(index)] = value; } }
        public void Fill(T value) => Live().Fill(value);
        public T[] ToArray() => Live().ToArray();
        public void CopyTo(Span<T> destination) => Live().CopyTo(destination.Length >= Length ? destination
            : throw new ArgumentException($"the destination holds {destination.Length} elements; the view has {Length}", nameof(destination)));
        public void CopyFrom(ReadOnlySpan<T> source) => (source.Length == Length ? source
            : throw new ArgumentException($"the source has {source.Length} elements; the view has {Length}", nameof(source))).CopyTo(Live());
    }

    /// <summary>What Step() did (shardopt_step_result): seconds waiting for gradient reductions, in the update and in the
    /// collectives after it; bytes this rank moved since the previous step returned.</summary>
    public sealed class StepResult
    {
        public readonly bool Applied, SkippedNonFinite, Accumulating;
        public readonly double GradNorm, ReduceWaitSeconds, UpdateSeconds, PostUpdateSeconds;
        public readonly long BytesSent;
        internal StepResult(shardopt_step_result r)
        {
            Applied = r.applied != 0; SkippedNonFinite = r.skipped_nonfinite != 0; Accumulating = r.accumulating != 0; GradNorm = r.grad_norm;
            ReduceWaitSeconds = r.reduce_wait_seconds; UpdateSeconds = r.update_seconds; PostUpdateSeconds = r.post_update_seconds; BytesSent = (long)r.bytes_sent;
        }
    }

    /// <summary>Bytes one rank holds now, in its memory space (shardopt_memory_stats); Host*: ZeRO-Offload's host memory.</summary>
    public sealed class MemoryStats
    {
        public readonly long ParamsBytes, GradsBytes, OptimizerStateBytes, BufferBytes, PeakBufferBytes, TotalBytes, CompressionBytes;
        public readonly long HostParamsBytes, HostGradsBytes, HostOptimizerStateBytes, HostTotalBytes;
        internal MemoryStats(shardopt_memory_stats m)
        {
            ParamsBytes = (long)m.params_bytes; GradsBytes = (long)m.grads_bytes; OptimizerStateBytes = (long)m.optimizer_state_bytes;
            BufferBytes = (long)m.buffer_bytes; PeakBufferBytes = (long)m.peak_buffer_bytes; TotalBytes = (long)m.total_bytes;
            CompressionBytes = (long)m.compression_bytes; HostParamsBytes = (long)m.host_params_bytes; HostGradsBytes = (long)m.host_grads_bytes;
            HostOptimizerStateBytes = (long)m.host_optimizer_state_bytes; HostTotalBytes = (long)m.host_total_bytes;
        }
    }

    /// <summary>AiDotNet's IShardedOptimizer (with IOptimizer's members).</summary>
    public interface IShardedOptimizer : IDisposable
    {
        int Rank { get; }
        int WorldSize { get; }
        Optimizer WrappedOptimizer { get; }
        ShardingConfiguration ShardingConfiguration { get; }
        OptimizationResult<float> Optimize(GradientModel model, OptimizationInputData inputData);
        void SynchronizeOptimizerState(); bool ShouldEarlyStop(); OptimizerOptions GetOptions(); void Reset();
        byte[] Serialize(); void Deserialize(byte[] data); void SaveModel(string path); void LoadModel(string path);
    }

    /// <summary>A sharded optimizer over a base optimizer. Initialize (or the first collective call of an optimizer whose base
    /// optimizer carries a model) creates it, collectively and checked: every rank must pass the same layout and options,
    /// else every rank fails naming the first difference. Typed members: float here, T in ShardedOptimizer&lt;T&gt;. Reset():
    /// collective, back to the initial parameters with fresh state. ShouldEarlyStop(): collective, true on every rank when
    /// early stopping ended a rank's last Optimize (ShouldEarlyStop(vote): when any rank votes true). LearningRate: the next
    /// step's (after a load: the checkpoint's); setting it, or GetOptions().LearningRate, is live.</summary>
    public abstract class ShardedOptimizer : IShardedOptimizer
    {
        readonly int strategy;
        readonly Action<shardopt_sharding_options> configure; // the subclass's own settings
        internal readonly int DType;
        SWIGTYPE_p_shardopt_optimizer_s handle;
        Pinned external; // the caller's parameter array
        bool disposed, lastStoppedEarly;
        long viewEpoch;
        ParameterLayout lastLayout; // what Reset() re-creates the native optimizer from
        Array lastInitial;
        object lastDevice; // DeviceMemory<T>? of Initialize: Reset re-creates the optimizer there
        internal ShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration configuration, int strategy, int dtype, Action<shardopt_sharding_options> configure)
        {
            WrappedOptimizer = wrappedOptimizer ?? throw new ArgumentNullException(nameof(wrappedOptimizer));
            ShardingConfiguration = configuration ?? throw new ArgumentNullException(nameof(configuration));
            this.strategy = strategy;
            this.configure = configure;
            DType = dtype;
            Sharding().Dispose(); // the library checks the subclass's settings now
        }
        // The configuration's options with this optimizer's strategy and settings, checked by the library.
        internal shardopt_sharding_options Sharding()
        {
            var s = Pin.Clone(ShardingConfiguration.Native, shardopt_sharding_options.getCPtr, SHARDOPT_SIZEOF_SHARDING_OPTIONS);
            try { s.strategy = strategy; configure?.Invoke(s); shardopt_sharding_options_validate_strict(s); return s; }
            catch { s.Dispose(); throw; }
        }
        internal virtual void Created(SWIGTYPE_p_shardopt_optimizer_s native) { }
        public Optimizer WrappedOptimizer { get; }
        public ShardingConfiguration ShardingConfiguration { get; }
        public int Rank => ShardingConfiguration.CommunicationBackend.Rank;
        public int WorldSize => ShardingConfiguration.CommunicationBackend.WorldSize;
        public OptimizerOptions GetOptions() => WrappedOptimizer.Options;
        public bool IsInitialized => handle != null;
        public Type ElementType => DType == SHARDOPT_F64 ? typeof(double) : typeof(float);
        internal SWIGTYPE_p_shardopt_optimizer_s H => disposed ? throw new ObjectDisposedException(GetType().Name, "the optimizer was disposed")
            : handle ?? throw new InvalidOperationException("the optimizer is not initialized: call Initialize(layout, initial) or Optimize(inputData) first");
        // Collective calls create an optimizer whose base optimizer carries a model from the model.
        internal SWIGTYPE_p_shardopt_optimizer_s Ready() { if (handle == null && !disposed) WrappedOptimizer.InitializeFromModel(this); return H; }
        internal long ViewEpoch => viewEpoch;
        internal bool ViewValid(long epoch) => !disposed && handle != null && (epoch < 0 || epoch == viewEpoch);
        internal void CheckView(long epoch)
        {
            if (disposed || handle == null) throw new ObjectDisposedException(GetType().Name, "this view's optimizer was disposed (or reset); its memory is gone");
            if (epoch >= 0 && epoch != viewEpoch) throw new ObjectDisposedException(GetType().Name, "this gradient/gathered view expired (GradReady, ZeroGrad, Step, Release or Optimize since): get a new one");
        }
        SWIGTYPE_p_shardopt_optimizer_s Expire() { var h = H; ++viewEpoch; return h; }
        internal void CheckType<T>(string what) where T : struct
        {
            if (Elem<T>.Check() != DType) throw new ArgumentException($"{what}: this optimizer's elements are {Elem<T>.Name(DType)}, got {typeof(T).Name} (use {GetType().Name.Split('`')[0]}<{Elem<T>.Name(Elem<T>.DType)}> for {typeof(T).Name} elements)");
        }
        /// <summary>Collective: creates this rank's native optimizer. initial: the packed parameters (null: zeros). parameters:
        /// the caller's array of PaddedCountFor(layout) elements, pinned and updated in place (DDP, ZeRO-1, ZeRO-2, Local SGD).</summary>
        public ShardedOptimizer Initialize(ParameterLayout layout, float[] initial = null, float[] parameters = null) => InitializeT(layout, initial, parameters);
        /// <summary>Collective: creates this rank's native optimizer in MemorySpace.Cuda with its parameters in the caller's device
        /// memory of PaddedCountFor(layout) elements (DDP, ZeRO-1, ZeRO-2, Local SGD), updated in place; initial: the packed
        /// parameters written there (null: the memory holds them). Then parameters.Stream waits for that (OrderStream).</summary>
        public ShardedOptimizer Initialize(ParameterLayout layout, float[] initial, DeviceMemory<float> parameters) => InitializeT(layout, initial, null, parameters);
        internal ShardedOptimizer InitializeT<T>(ParameterLayout layout, T[] initial, T[] parameters, DeviceMemory<T>? device = null) where T : struct
        {
            if (disposed) throw new ObjectDisposedException(GetType().Name);
            if (layout == null) throw new ArgumentNullException(nameof(layout));
            CheckType<T>("Initialize");
            if (handle != null) throw new InvalidOperationException("the optimizer is already initialized");
            if (device is DeviceMemory<T> d)
            {
                if (d.IsEmpty) throw new ArgumentException($"parameters is an empty DeviceMemory<{typeof(T).Name}> (default): make it with new DeviceMemory<{typeof(T).Name}>(pointer, length)", nameof(parameters));
                if (ShardingConfiguration.Memory != MemorySpace.Cuda) // never read on the host
                    throw new ArgumentException($"parameters is CUDA device memory (a DeviceMemory<{typeof(T).Name}>), the optimizer's memory is host memory: set ShardingConfiguration.Memory = MemorySpace.Cuda, or pass a host array", nameof(parameters));
            }
            if (initial != null && initial.Length != layout.ElementCount) // the library cannot see an array's length
                throw new ArgumentException($"initial has {initial.Length} elements; the layout has {layout.ElementCount}", nameof(initial));
            using (var options = Pin.Clone(WrappedOptimizer.Options.Native, shardopt_optimizer_options.getCPtr, SHARDOPT_SIZEOF_OPTIMIZER_OPTIONS))
            using (var s = Sharding())
            using (var init = initial != null ? new Pinned(initial) : null)
            {
                var p = layout.ToNative(DType);
                try
                {
                    var comm = ShardingConfiguration.CommunicationBackend.Handle;
                    if (device is DeviceMemory<T> memory) // the library checks its count and that it is the GPU's memory
                    {
                        shardopt_optimizer_create_external(comm, p, options, s, init?.Ptr ?? IntPtr.Zero, memory.Pointer, (ulong)memory.Length, out handle);
                        try { shardopt_optimizer_order_stream(handle, memory.Stream); } catch { DestroyNative(); throw; }
                    }
                    else if (parameters == null) shardopt_optimizer_create(comm, p, options, s, init?.Ptr ?? IntPtr.Zero, out handle);
                    else
                    {
                        if (ShardingConfiguration.Memory == MemorySpace.Cuda) // a pinned managed array is host memory
                            throw new ArgumentException($"parameters is host memory (a managed array), the optimizer's memory is CUDA device memory: pass DeviceMemory<{typeof(T).Name}> of its GPU, or leave parameters out (the library's own device memory)", nameof(parameters));
                        external = new Pinned(parameters);
                        try { shardopt_optimizer_create_external(comm, p, options, s, init?.Ptr ?? IntPtr.Zero, external.Ptr, (ulong)parameters.Length, out handle); }
                        catch { external.Dispose(); external = null; throw; }
                    }
                    try { Created(handle); } catch { DestroyNative(); throw; }
                }
                finally { shardopt_params_destroy(p); }
            }
            lastLayout = layout;
            lastInitial = (T[])initial?.Clone();
            lastDevice = device;
            return this;
        }
        /// <summary>The length of the caller's parameter array Initialize takes (the padded flat buffer).</summary>
        public long PaddedCountFor(ParameterLayout layout)
        {
            var p = (layout ?? throw new ArgumentNullException(nameof(layout))).ToNative(DType);
            try { using (var s = Sharding()) { shardopt_params_padded_count_for(p, s, WorldSize, out ulong n); return (long)n; } }
            finally { shardopt_params_destroy(p); }
        }
        public void Reset()
        {
            if (disposed) throw new ObjectDisposedException(GetType().Name);
            if (handle == null) return;
            DestroyNative();
            if (DType == SHARDOPT_F64) InitializeT(lastLayout, (double[])lastInitial, null, (DeviceMemory<double>?)lastDevice);
            else InitializeT(lastLayout, (float[])lastInitial, null, (DeviceMemory<float>?)lastDevice);
        }
        public void SynchronizeOptimizerState() => shardopt_optimizer_synchronize_state(H);
        public bool ShouldEarlyStop() => ShouldEarlyStop(WrappedOptimizer.Options.UseEarlyStopping && lastStoppedEarly);
        public bool ShouldEarlyStop(bool vote) { shardopt_optimizer_should_early_stop(H, vote ? 1 : 0, out int stop); return stop != 0; }
        public double LearningRate { get { shardopt_optimizer_learning_rate(H, out double lr); return lr; } set => SetLearningRate(value); }
        public void SetLearningRate(double lr) => shardopt_optimizer_set_learning_rate(H, lr);
        // GetOptions().LearningRate, when changed since the library last took it, is the rate from now on (its rule).
        internal void SyncOptionsLearningRate() => shardopt_optimizer_follow_options(H, WrappedOptimizer.Options.Native);
        // ---- Optimize: one shardopt_optimizer_train with the options' training settings ----
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int BatchFn(IntPtr user, IntPtr batch, out double loss);
        /// <summary>The lower-level Optimize, collective: trains on sample indices [0, NumSamples) with the options' BatchSize,
        /// MaxIterations, ShuffleData, schedule and early stopping, scores each epoch on the validation set's NumValidationSamples
        /// and the best solution on every set given (0: none). A model exception on one rank is rethrown there and fails
        /// every other rank naming it.</summary>
        public OptimizationResult<float> Optimize(GradientModel model, OptimizationInputData inputData) => Train(model == null ? null : new GradientModel<float>(model), inputData);
        /// <summary>Optimize with the model on the GPU (an optimizer in CUDA memory): the model gets device views of the
        /// library's memory (NativeView: DevicePointer, DeviceId, CudaStream, the stream its work is ordered on) instead of
        /// host copies, valid during the call; the gradient view is null for loss-only calls (docs/training.md).</summary>
        public OptimizationResult<float> OptimizeOnDevice(DeviceGradientModel<float> model, OptimizationInputData inputData) => Train(model, inputData);
        internal OptimizationResult<T> Train<T>(GradientModel<T> model, OptimizationInputData data) where T : struct =>
            Train(model, (data ?? throw new ArgumentNullException(nameof(data))).NumSamples, data.NumValidationSamples,
                  data.NumTestSamples);
        internal OptimizationResult<T> Train<T>(DeviceGradientModel<T> model, OptimizationInputData data) where T : struct =>
            Train(null, model ?? throw new ArgumentNullException(nameof(model)), (data ?? throw new ArgumentNullException(nameof(data))).NumSamples,
                  data.NumValidationSamples, data.NumTestSamples);
        internal OptimizationResult<T> Train<T>(GradientModel<T> model, long train, long validation, long test) where T : struct =>
            Train(model ?? throw new ArgumentNullException(nameof(model)), null, train, validation, test);
        // One of hostModel (host copies of the parameters and gradient) and deviceModel (the training options' device_batches:
        // device views of the optimizer's memory, expired when the call returns).
        unsafe OptimizationResult<T> Train<T>(GradientModel<T> hostModel, DeviceGradientModel<T> deviceModel, long train, long validation,
                                              long test) where T : struct
        {
            CheckType<T>("Optimize");
            Ready();
            if (hostModel != null && WrappedOptimizer.Options.DeviceBatches)
                throw new InvalidOperationException("DeviceBatches: the library hands the model device memory, which a GradientModel (spans of host " +
                                                    "memory) cannot read; use OptimizeOnDevice(DeviceGradientModel<T>, ...), or leave DeviceBatches off");
            SyncOptionsLearningRate();
            var h = Expire();
            int n = (int)ElementCount;
            var scratch = new T[n]; // the gradient of loss-only calls
            BatchFn fn = (IntPtr user, IntPtr b, out double loss) =>
            {
                double l = 0;
                int rc = Callbacks.Guard(() =>
                {
                    var batch = new shardopt_batch(b, false);
                    IntPtr grad = batch.grad;
                    var samples = new ReadOnlySpan<long>((void*)batch.samples, (int)batch.sample_count);
                    if (deviceModel != null)
                    {
                        try { l = deviceModel(new NativeView<T>(this, batch.params_, n, true), grad != IntPtr.Zero ? new NativeView<T>(this, grad, n, true) : null, samples, (Dataset)batch.dataset); }
                        finally { Expire(); } // the views are the call's only
                        return;
                    }
                    if (grad == IntPtr.Zero) Array.Clear(scratch, 0, n);
                    l = hostModel(new ReadOnlySpan<T>((void*)batch.params_, n), grad != IntPtr.Zero ? new Span<T>((void*)grad, n) : scratch,
                                  samples, (Dataset)batch.dataset);
                });
                loss = l;
                return rc;
            };
            using (var t = Pin.Clone(WrappedOptimizer.Options.Training, shardopt_training_options.getCPtr, SHARDOPT_SIZEOF_TRAINING_OPTIONS))
            using (var r = new shardopt_training_result { struct_size = SHARDOPT_SIZEOF_TRAINING_RESULT })
            {
                t.num_samples = train; t.num_validation_samples = validation; t.num_test_samples = test;
                if (deviceModel != null) t.device_batches = 1; // the model's type asks for device memory
                var keep = WrappedOptimizer.Options.LearningRateSchedule?.Apply(t);
                int epochs = t.max_epochs;
                var best = new T[n];
                double[] training = new double[epochs], valid = new double[epochs], rates = new double[epochs];
                using (Pinned pb = new Pinned(best), pt = new Pinned(training), pv = new Pinned(valid), pr = new Pinned(rates))
                {
                    r.best_parameters = pb.Ptr; r.best_parameters_count = (ulong)n; r.history_capacity = (ulong)epochs;
                    r.training_loss_history = pt.Ptr; r.validation_loss_history = pv.Ptr; r.learning_rate_history = pr.Ptr;
                    Callbacks.Call(() => shardopt_optimizer_train(h, Marshal.GetFunctionPointerForDelegate(fn), IntPtr.Zero, t, r));
                    GC.KeepAlive(fn);
                    GC.KeepAlive(keep);
                }
                lastStoppedEarly = r.stopped_early != 0;
                int ran = r.epochs;
                var result = new OptimizationResult<T>();
                result.BestSolution = best; result.BestFitnessScore = r.best_score; result.BestEpoch = r.best_epoch;
                result.Iterations = ran; result.Steps = r.steps; result.StoppedEarly = lastStoppedEarly;
                result.TrainingLossHistory = training.Take(ran).ToArray();
                result.ValidationLossHistory = valid.Take(ran).ToArray();
                result.LearningRateHistory = rates.Take(ran).ToArray();
                result.FitnessHistory = validation > 0 ? result.ValidationLossHistory : result.TrainingLossHistory;
                result.TrainingResult.Set(r.training_loss, train);
                result.ValidationResult.Set(r.validation_loss, validation);
                result.TestResult.Set(r.test_loss, test);
                return result;
            }
        }
        // ---- checkpoints, collective: every rank calls with the same arguments; a failed load changes nothing ----
        /// <summary>The consolidated checkpoint (parameters, optimizer state, step count), identical on every rank.</summary>
        public byte[] Serialize()
        {
            shardopt_optimizer_serialize(Ready(), out IntPtr data, out ulong n);
            try { var bytes = new byte[n <= int.MaxValue ? (int)n : throw new OutOfMemoryException($"the checkpoint ({n} bytes) does not fit in a byte[]")]; Marshal.Copy(data, bytes, 0, bytes.Length); return bytes; }
            finally { shardopt_buffer_free(data); }
        }
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int WriteFn(IntPtr user, IntPtr data, UIntPtr size);
        /// <summary>Serialize()'s bytes (but for the head's generation, new each time) written to stream a window
        /// (SHARDOPT_CHECKPOINT_WINDOW_BYTES, 32 MiB) at a time, so no rank holds the whole checkpoint: a FileStream, a
        /// NetworkStream. Collective; null: this rank wants no bytes (its parts still reach the others). An exception the
        /// stream throws ends the writes on its rank and, once the stream is over, is rethrown there; the other ranks
        /// throw IOException naming it. The stream is neither flushed nor closed.</summary>
        public void Serialize(Stream stream)
        {
            var h = Ready();
            if (stream == null) { shardopt_optimizer_serialize_to(h, IntPtr.Zero, IntPtr.Zero); return; }
            byte[] buffer = new byte[0]; // reused: a window at most
            WriteFn fn = (IntPtr user, IntPtr data, UIntPtr size) => Callbacks.Guard(() =>
            {
                int n = checked((int)size.ToUInt64());
                if (buffer.Length < n) buffer = new byte[n];
                Marshal.Copy(data, buffer, 0, n);
                stream.Write(buffer, 0, n);
            });
            Callbacks.Call(() => shardopt_optimizer_serialize_to(h, Marshal.GetFunctionPointerForDelegate(fn), IntPtr.Zero));
            GC.KeepAlive(fn); // the library calls it until serialize_to returns
        }
        /// <summary>Loads bytes from Serialize; IOException when they are corrupt, ArgumentException for another layout.</summary>
        public void Deserialize(byte[] data)
        {
            if (data == null) throw new ArgumentNullException(nameof(data));
            Ready();
            SyncOptionsLearningRate(); // first: the checkpoint's rate wins until the options change again
            var h = Expire();
            Pin.Call<byte>(data, (p, n) => shardopt_optimizer_deserialize(h, p, n));
        }
        /// <summary>Saves into directory path (created if missing): sharded (every rank its shard), or consolidated (rank 0).</summary>
        public void SaveModel(string path) => SaveModel(path, false);
        public void SaveModel(string path, bool consolidated) =>
            shardopt_optimizer_save(Ready(), path ?? throw new ArgumentNullException(nameof(path)), consolidated ? SHARDOPT_CHECKPOINT_CONSOLIDATED : SHARDOPT_CHECKPOINT_SHARDED);
        /// <summary>Loads a checkpoint of either form, of any strategy and world size; IOException when missing or corrupt.</summary>
        public void LoadModel(string path)
        {
            if (path == null) throw new ArgumentNullException(nameof(path));
            Ready();
            SyncOptionsLearningRate();
            shardopt_optimizer_load(Expire(), path);
        }
        // ---- layout, parameters and the step protocol ----
        public int TensorCount { get { shardopt_optimizer_tensor_count(H, out int n); return n; } }
        public int BucketCount { get { shardopt_optimizer_bucket_count(H, out int n); return n; } }
        public long TensorSize(int tensor) { shardopt_optimizer_tensor_info(H, tensor, out ulong n, out int b); return (long)n; }
        public int TensorBucket(int tensor) { shardopt_optimizer_tensor_info(H, tensor, out ulong n, out int b); return b; }
        public long BucketSize(int bucket) { shardopt_optimizer_bucket_info(H, bucket, out ulong n); return (long)n; }
        public long ElementCount { get { shardopt_optimizer_element_count(H, out ulong n, out ulong padded); return (long)n; } }
        public long PaddedCount { get { shardopt_optimizer_element_count(H, out ulong n, out ulong padded); return (long)padded; } }
        public long StepCount { get { shardopt_optimizer_step_count(H, out long n); return n; } }
        /// <summary>Where the library keeps this optimizer's parameters, gradients and state (its answer, not the configuration's).</summary>
        public MemorySpace Memory { get { shardopt_optimizer_device(H, out int memory, out int device, out IntPtr stream); return (MemorySpace)memory; } }
        /// <summary>Makes the CUDA stream `stream` (a cudaStream_t; IntPtr.Zero: the legacy default stream) wait, on the device, for
        /// everything this optimizer enqueued so far (shardopt_optimizer_order_stream: an event recorded on its compute stream;
        /// the host never waits): call it before another CUDA library reads or writes the optimizer's device memory (a view's
        /// DevicePointer, your DeviceMemory) on that stream. In host memory there is nothing to order. Not collective; an
        /// invalid stream is the CUDA runtime's error (ArgumentException).</summary>
        public void OrderStream(IntPtr stream) => shardopt_optimizer_order_stream(H, stream);
        /// <summary>Bytes this rank has moved over the optimizer's communicators since it was created.</summary>
        public long BytesSent { get { shardopt_optimizer_bytes_sent(H, out ulong n); return (long)n; } }
        /// <summary>The full flat (padded) parameter buffer, valid until Dispose; not for FSDP (sharded at rest).</summary>
        public NativeView<float> Parameters => ParametersT<float>();
        public void GetParameters(Span<float> packed) => GetParametersT<float>(packed);
        public float[] GetParameters() { var a = new float[ElementCount]; GetParameters(a); return a; }
        public void SetParameters(ReadOnlySpan<float> packed) => SetParametersT<float>(packed);
        /// <summary>FSDP: the unit's full parameters (collective), valid until Release(bucket) or the next step.</summary>
        public NativeView<float> Gather(int bucket) => GatherT<float>(bucket);
        public void Release(int bucket) => shardopt_optimizer_release(Expire(), bucket);
        /// <summary>The bucket's (tensor's) gradient, valid until GradReady, ZeroGrad or Step.</summary>
        public NativeView<float> BucketGradient(int bucket) => BucketGradientT<float>(bucket);
        public NativeView<float> TensorGradient(int tensor) => TensorGradientT<float>(tensor);
        public void ZeroGrad() => shardopt_optimizer_zero_grad(Expire());
        public void GradReady(int bucket) => shardopt_optimizer_grad_ready(Expire(), bucket);
        public StepResult Step()
        { SyncOptionsLearningRate(); using (var r = new shardopt_step_result { struct_size = SHARDOPT_SIZEOF_STEP_RESULT }) { shardopt_optimizer_step(Expire(), r); return new StepResult(r); } }
        public MemoryStats GetMemoryStats()
        { using (var m = new shardopt_memory_stats { struct_size = SHARDOPT_SIZEOF_MEMORY_STATS }) { shardopt_optimizer_memory_stats(H, m); return new MemoryStats(m); } }
        internal NativeView<T> ParametersT<T>() where T : struct { CheckType<T>("Parameters"); shardopt_optimizer_parameters(H, out IntPtr p); return new NativeView<T>(this, p, PaddedCount, false); }
        internal NativeView<T> GatherT<T>(int bucket) where T : struct { CheckType<T>("Gather"); shardopt_optimizer_gather(H, bucket, out IntPtr p); return new NativeView<T>(this, p, BucketSize(bucket), true); }
        internal NativeView<T> BucketGradientT<T>(int bucket) where T : struct { CheckType<T>("BucketGradient"); shardopt_optimizer_bucket_grad(H, bucket, out IntPtr p, out ulong n); return new NativeView<T>(this, p, (long)n, true); }
        internal NativeView<T> TensorGradientT<T>(int tensor) where T : struct { CheckType<T>("TensorGradient"); shardopt_optimizer_tensor_grad(H, tensor, out IntPtr p, out ulong n); return new NativeView<T>(this, p, (long)n, true); }
        internal void GetParametersT<T>(Span<T> packed) where T : struct { CheckType<T>("GetParameters"); var h = H; Pin.Call<T>(packed, (p, n) => shardopt_optimizer_get_parameters(h, p, n)); }
        internal void SetParametersT<T>(ReadOnlySpan<T> packed) where T : struct { CheckType<T>("SetParameters"); var h = H; Pin.Call(packed, (p, n) => shardopt_optimizer_set_parameters(h, p, n)); }
        // ---- a PipelineRunner batch running natively on this optimizer (Pipeline.cs); meanwhile the library refuses changes ----
        internal void BeginPipelineBatch() { SyncOptionsLearningRate(); Expire(); }
        internal void EndPipelineBatch() => ++viewEpoch;
        void DestroyNative()
        {
            if (handle != null) { shardopt_optimizer_destroy(handle); handle = null; } // refused (changing nothing) while it trains or runs a batch
            ++viewEpoch;
            external?.Dispose(); external = null;
        }
        public void Dispose() { DestroyNative(); disposed = true; }
    }

    /// <summary>A sharded optimizer of element type T (float or double; another T raises NotSupportedException).</summary>
    public abstract class ShardedOptimizer<T> : ShardedOptimizer where T : struct
    {
        internal ShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration configuration, int strategy, Action<shardopt_sharding_options> configure = null)
            : base(wrappedOptimizer, configuration, strategy, Elem<T>.Check(), configure) { }
        public ShardedOptimizer<T> Initialize(ParameterLayout layout, T[] initial = null, T[] parameters = null) { InitializeT(layout, initial, parameters); return this; }
        /// <summary>The parameters in the caller's CUDA memory (see ShardedOptimizer.Initialize(layout, initial, DeviceMemory)).</summary>
        public ShardedOptimizer<T> Initialize(ParameterLayout layout, T[] initial, DeviceMemory<T> parameters) { InitializeT(layout, initial, null, parameters); return this; }
        public new NativeView<T> Parameters => ParametersT<T>();
        public new T[] GetParameters() { var a = new T[ElementCount]; GetParametersT<T>(a); return a; }
        public void GetParameters(Span<T> packed) => GetParametersT(packed);
        public void SetParameters(ReadOnlySpan<T> packed) => SetParametersT(packed);
        public void SetParameters(T[] packed) => SetParametersT<T>(packed ?? throw new ArgumentNullException(nameof(packed)));
        public new NativeView<T> Gather(int bucket) => GatherT<T>(bucket);
        public new NativeView<T> BucketGradient(int bucket) => BucketGradientT<T>(bucket);
        public new NativeView<T> TensorGradient(int tensor) => TensorGradientT<T>(tensor);
        /// <summary>The lower-level Optimize (see ShardedOptimizer.Optimize).</summary>
        public OptimizationResult<T> Optimize(GradientModel<T> model, OptimizationInputData inputData) => Train(model, inputData);
        /// <summary>Optimize with the model on the GPU (see ShardedOptimizer.OptimizeOnDevice).</summary>
        public OptimizationResult<T> OptimizeOnDevice(DeviceGradientModel<T> model, OptimizationInputData inputData) => Train(model, inputData);
        /// <summary>AiDotNet's Optimize(inputData), collective: trains the wrapped optimizer's model on XTrain/YTrain with the
        /// options' training settings, scores each epoch on XValidation/YValidation when given, reports the best solution's
        /// losses on the three sets and gives it to the model (SetParameters).</summary>
        public OptimizationResult<T> Optimize<TInput, TOutput>(OptimizationInputData<T, TInput, TOutput> inputData)
        {
            var d = inputData ?? throw new ArgumentNullException(nameof(inputData));
            var model = (WrappedOptimizer as IModelOptimizer<T, TInput, TOutput>)?.Model
                ?? throw new ArgumentException($"the wrapped optimizer carries no IGradientModel<{typeof(T).Name}, {typeof(TInput).Name}, {typeof(TOutput).Name}>: " +
                                               "build it as new AdamOptimizer<T, TInput, TOutput>(model, options), or use Optimize(GradientModel<T>, OptimizationInputData)");
            if (d.XTrain == null || d.YTrain == null) throw new ArgumentException("inputData needs XTrain and YTrain");
            bool validation = d.XValidation != null && d.YValidation != null, test = d.XTest != null && d.YTest != null;
            var r = Train<T>((p, g, s, set) => set == Dataset.Training ? model.ComputeLossAndGradient(p, g, d.XTrain, d.YTrain, s)
                                  : set == Dataset.Validation ? model.ComputeLossAndGradient(p, g, d.XValidation, d.YValidation, s)
                                  : model.ComputeLossAndGradient(p, g, d.XTest, d.YTest, s),
                model.SampleCount(d.XTrain), validation ? model.SampleCount(d.XValidation) : 0, test ? model.SampleCount(d.XTest) : 0);
            model.SetParameters((T[])r.BestSolution.Clone());
            return r;
        }
    }
}
