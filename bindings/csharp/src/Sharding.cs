using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>How gradients are compressed on the wire (ShardingConfiguration.GradientCompression). BF16/FP16: 2 bytes
    /// per element. Int8/Int4: blockwise, a scale per 256 elements. TopK: the CompressionRatio largest-magnitude
    /// elements of each chunk. PowerSGD: a rank-PowerSgdRank approximation of every tensor declared as a matrix
    /// (ParameterLayout.AddMatrix); other tensors go uncompressed. Error feedback (the default) keeps what Int8, Int4,
    /// TopK and PowerSGD missed and adds it to the next step. Values are the C ABI's shardopt_compression.</summary>
    public enum GradientCompression { None = 0, BF16 = 1, FP16 = 2, Int8 = 3, Int4 = 4, TopK = 5, PowerSGD = 6 }

    /// <summary>The model's tensors in order (their element type is the optimizer's). EndBucket() closes a gradient
    /// bucket (an FSDP unit); otherwise tensors are grouped into buckets of MinimumParameterGroupSize elements.
    /// AddMatrix declares a row-major matrix: the tensors PowerSGD compression approximates.</summary>
    public sealed class ParameterLayout
    {
        readonly List<(string name, ulong count, bool tp, bool end, ulong rows, ulong cols)> tensors = new List<(string, ulong, bool, bool, ulong, ulong)>();

        public ParameterLayout Add(string name, long count, bool tensorParallelReplicated = false)
        {
            if (name == null) throw new ArgumentNullException(nameof(name));
            if (count < 1)
                throw new ArgumentOutOfRangeException(nameof(count), count, $"tensor '{name}' must have at least 1 element (got {count})");
            tensors.Add((name, (ulong)count, tensorParallelReplicated, false, 0, 0));
            return this;
        }

        /// <summary>A rows x cols row-major matrix (rows * cols elements), which PowerSGD compression approximates.</summary>
        public ParameterLayout AddMatrix(string name, long rows, long cols, bool tensorParallelReplicated = false)
        {
            if (name == null) throw new ArgumentNullException(nameof(name));
            if (rows < 1) throw new ArgumentOutOfRangeException(nameof(rows), rows, $"tensor '{name}' must have at least 1 row (got {rows})");
            if (cols < 1) throw new ArgumentOutOfRangeException(nameof(cols), cols, $"tensor '{name}' must have at least 1 column (got {cols})");
            if (rows > int.MaxValue / cols) throw new ArgumentOutOfRangeException(nameof(rows), rows, $"tensor '{name}': {rows} x {cols} elements are too many");
            tensors.Add((name, (ulong)(rows * cols), tensorParallelReplicated, false, (ulong)rows, (ulong)cols));
            return this;
        }

        public ParameterLayout EndBucket()
        {
            if (tensors.Count > 0) { var t = tensors[tensors.Count - 1]; t.end = true; tensors[tensors.Count - 1] = t; }
            return this;
        }

        public int TensorCount => tensors.Count;
        public long ElementCount { get { ulong n = 0; foreach (var t in tensors) n += t.count; return (long)n; } }

        internal SWIGTYPE_p_shardopt_params_s ToNative(int bucketElements, int dtype)
        {
            NativeInit.Ensure();
            if (tensors.Count == 0) throw new ArgumentException("the parameter layout is empty: Add(name, count) its tensors first");
            int elem = dtype == shardopt_native.SHARDOPT_F64 ? 8 : 4;
            var p = shardopt_native.so_params_create(dtype, (ulong)bucketElements * (ulong)elem);
            try
            {
                foreach (var t in tensors)
                {
                    if (t.rows > 0) shardopt_native.so_params_add_matrix(p, t.name, t.rows, t.cols, t.tp ? 1 : 0);
                    else shardopt_native.so_params_add(p, t.name, t.count, t.tp ? 1 : 0);
                    if (t.end) shardopt_native.so_params_end_bucket(p);
                }
            }
            catch { shardopt_native.so_params_destroy(p); throw; }
            return p;
        }
    }

    /// <summary>A view of library memory (parameters, a gradient bucket, a gathered FSDP unit). It checks every
    /// access: after its optimizer is disposed, or once the memory may move (gradient views after GradReady,
    /// ZeroGrad, Step; gathered views after Release or Step), it throws ObjectDisposedException instead of
    /// touching freed memory.</summary>
    public sealed class NativeView<T> where T : struct
    {
        readonly ShardedOptimizer owner;
        readonly long epoch; // -1: lives as long as the optimizer
        readonly IntPtr ptr;

        internal NativeView(ShardedOptimizer owner, IntPtr ptr, int length, bool transient)
        {
            this.owner = owner; this.ptr = ptr; Length = length; epoch = transient ? owner.ViewEpoch : -1;
        }

        public int Length { get; }
        public bool IsValid => owner.ViewValid(epoch);

        unsafe Span<T> Live()
        {
            owner.CheckView(epoch);
            return new Span<T>((void*)ptr, Length);
        }

        public T this[int index]
        {
            get { if ((uint)index >= (uint)Length) throw new IndexOutOfRangeException($"index {index} of a view of {Length} elements"); return Live()[index]; }
            set { if ((uint)index >= (uint)Length) throw new IndexOutOfRangeException($"index {index} of a view of {Length} elements"); var s = Live(); s[index] = value; }
        }

        public void Fill(T value) => Live().Fill(value);
        public T[] ToArray() => Live().ToArray();
        public void CopyTo(Span<T> destination)
        {
            if (destination.Length < Length) throw new ArgumentException($"the destination holds {destination.Length} elements; the view has {Length}", nameof(destination));
            Live().CopyTo(destination);
        }
        public void CopyFrom(ReadOnlySpan<T> source)
        {
            if (source.Length != Length) throw new ArgumentException($"the source has {source.Length} elements; the view has {Length}", nameof(source));
            source.CopyTo(Live());
        }
    }

    /// <summary>How a sharded optimizer communicates (AiDotNet's ShardingConfiguration).
    /// LearningRate: when set, the steps use it; when null (AiDotNet: 0.01) the wrapped optimizer's rate is used.
    /// AutoSyncGradients=false turns DDP/ZeRO-1 into Local SGD (averaging every LocalSteps steps).
    /// MinimumParameterGroupSize: the gradient bucket (FSDP unit) size in elements.
    /// EnableGradientCompression (false): true compresses every gradient reduction (and Local SGD's averaging) with
    /// GradientCompression (Int8 by default); the optimizer's BytesSent shows the saving. CompressionRatio (0.1):
    /// TopK's fraction of each chunk sent, in (0, 1]. ErrorFeedback (true): keep what compression missed and add it to
    /// the next step. PowerSgdRank (4): PowerSGD's rank, in [1, 1024]. Invalid values throw ArgumentException.
    /// CpuOffloadOptimizer, CpuOffloadGradients, CpuOffloadParams (false): ZeRO-Offload (docs/offload.md). They act on an
    /// optimizer in CUDA memory; these optimizers keep their memory in host memory, where the flags are accepted and
    /// change nothing (GetMemoryStats() too). CreateForZeROOffload turns on the first, CreateForZeROOffloadFull all three.</summary>
    public class ShardingConfiguration
    {
        double? learningRate;
        int groupSize = 1024;
        GradientCompression compression = GradientCompression.Int8;
        double compressionRatio = 0.1;
        int powerSgdRank = 4;

        public ShardingConfiguration(CommunicationBackend backend, double? learningRate = null)
        {
            CommunicationBackend = backend ?? throw new ArgumentNullException(nameof(backend));
            LearningRate = learningRate;
        }

        public static ShardingConfiguration CreateDefault(CommunicationBackend backend) => new ShardingConfiguration(backend);
        /// <summary>Small buckets (512 elements): more, earlier reductions overlapping the backward pass.</summary>
        public static ShardingConfiguration CreateForHighBandwidth(CommunicationBackend backend) =>
            new ShardingConfiguration(backend) { MinimumParameterGroupSize = 512 };
        /// <summary>Large buckets (4096 elements), fewer messages, and gradient compression on (Int8 with error
        /// feedback), as in AiDotNet.</summary>
        public static ShardingConfiguration CreateForLowBandwidth(CommunicationBackend backend) =>
            new ShardingConfiguration(backend) { MinimumParameterGroupSize = 4096, EnableGradientCompression = true };
        /// <summary>DeepSpeed's ZeRO-Offload: optimizer state, master weights and the update on the CPU (CpuOffloadOptimizer).</summary>
        public static ShardingConfiguration CreateForZeROOffload(CommunicationBackend backend) =>
            new ShardingConfiguration(backend) { CpuOffloadOptimizer = true };
        /// <summary>ZeRO-Offload of the optimizer, the gradients and (FSDP) the parameter shard.</summary>
        public static ShardingConfiguration CreateForZeROOffloadFull(CommunicationBackend backend) =>
            new ShardingConfiguration(backend) { CpuOffloadOptimizer = true, CpuOffloadGradients = true, CpuOffloadParams = true };

        public CommunicationBackend CommunicationBackend { get; }
        public double? LearningRate
        {
            get => learningRate;
            set { if (value.HasValue && !(value.Value > 0)) throw new ArgumentException($"LearningRate must be > 0 (got {value})"); learningRate = value; }
        }
        public bool AutoSyncGradients { get; set; } = true;
        public int MinimumParameterGroupSize
        {
            get => groupSize;
            set { if (value < 1) throw new ArgumentException($"MinimumParameterGroupSize must be >= 1 (got {value})"); groupSize = value; }
        }
        /// <summary>True: gradient reductions are compressed with GradientCompression (Int8 by default).</summary>
        public bool EnableGradientCompression { get; set; }
        /// <summary>The method used when EnableGradientCompression is true.</summary>
        public GradientCompression GradientCompression
        {
            get => compression;
            set
            {
                if (!Enum.IsDefined(typeof(GradientCompression), value))
                    throw new ArgumentException($"GradientCompression must be one of {string.Join(", ", Enum.GetNames(typeof(GradientCompression)))} (got {(int)value})", nameof(value));
                compression = value;
            }
        }
        /// <summary>TopK: the fraction of each chunk sent, in (0, 1].</summary>
        public double CompressionRatio
        {
            get => compressionRatio;
            set => compressionRatio = CheckRatio(value, nameof(CompressionRatio));
        }
        public bool ErrorFeedback { get; set; } = true;
        /// <summary>PowerSGD: the approximation's rank, in [1, 1024].</summary>
        public int PowerSgdRank
        {
            get => powerSgdRank;
            set { if (value < 1 || value > 1024) throw new ArgumentException($"PowerSgdRank must be in [1, 1024] (got {value})", nameof(value)); powerSgdRank = value; }
        }

        internal static double CheckRatio(double value, string name)
        {
            if (!(value > 0 && value <= 1)) throw new ArgumentException($"{name} must be in (0, 1] (got {value})", name);
            return value;
        }
        /// <summary>True (the default, as PyTorch DDP): the initial parameters are rank 0's, broadcast to every
        /// rank of its data-parallel group, so replicas cannot start apart. False keeps each rank's own.</summary>
        public bool BroadcastInitialParameters { get; set; } = true;
        public int LocalSteps { get; set; } = 4;
        public int GradientAccumulationSteps { get; set; } = 1;
        public double MaxGradNorm { get; set; }
        /// <summary>ZeRO-Offload of the optimizer state, the master weights and the update (an optimizer in CUDA memory).</summary>
        public bool CpuOffloadOptimizer { get; set; }
        /// <summary>ZeRO-Offload of the reduced gradients (with CpuOffloadOptimizer).</summary>
        public bool CpuOffloadGradients { get; set; }
        /// <summary>ZeRO-Offload of FSDP's parameter shard (with CpuOffloadOptimizer).</summary>
        public bool CpuOffloadParams { get; set; }
    }

    /// <summary>AiDotNet's ShardingConfiguration&lt;T&gt; over a backend of element type T.</summary>
    public class ShardingConfiguration<T> : ShardingConfiguration where T : struct
    {
        public ShardingConfiguration(CommunicationBackend<T> backend, double? learningRate = null) : base(backend, learningRate) { Elem<T>.Check(); }
        public new CommunicationBackend<T> CommunicationBackend => (CommunicationBackend<T>)base.CommunicationBackend;
        public static ShardingConfiguration<T> CreateDefault(CommunicationBackend<T> backend) => new ShardingConfiguration<T>(backend);
        public static ShardingConfiguration<T> CreateForHighBandwidth(CommunicationBackend<T> backend) =>
            new ShardingConfiguration<T>(backend) { MinimumParameterGroupSize = 512 };
        public static ShardingConfiguration<T> CreateForLowBandwidth(CommunicationBackend<T> backend) =>
            new ShardingConfiguration<T>(backend) { MinimumParameterGroupSize = 4096, EnableGradientCompression = true };
        public static ShardingConfiguration<T> CreateForZeROOffload(CommunicationBackend<T> backend) =>
            new ShardingConfiguration<T>(backend) { CpuOffloadOptimizer = true };
        public static ShardingConfiguration<T> CreateForZeROOffloadFull(CommunicationBackend<T> backend) =>
            new ShardingConfiguration<T>(backend) { CpuOffloadOptimizer = true, CpuOffloadGradients = true, CpuOffloadParams = true };
    }

    /// <summary>The data set is the sample indices [0, NumSamples), split across data-parallel ranks.</summary>
    public sealed class OptimizationInputData
    {
        public long NumSamples { get; set; }
        public long BatchSize { get; set; }
        public int Epochs { get; set; } = 1;
        public long MaxIterations { get; set; }
        public int Patience { get; set; }
        public double MinDelta { get; set; }
        /// <summary>A fresh order each epoch from (Seed, epoch), the same on every rank.</summary>
        public bool Shuffle { get; set; }
        public ulong Seed { get; set; }
        /// <summary>The number of this call's first epoch, for the shuffle order (one call per epoch passes its epoch).</summary>
        public int FirstEpoch { get; set; }
    }

    public sealed class OptimizationResult
    {
        public float[] BestSolution { get; internal set; }
        public double BestFitnessScore { get; internal set; }
        public long Iterations { get; internal set; }
        public double[] FitnessHistory { get; internal set; }
        public bool StoppedEarly { get; internal set; }
    }

    public struct StepResult
    {
        public StepResult(bool applied, bool skipped, bool accumulating, double norm)
            : this(applied, skipped, accumulating, norm, 0, 0, 0) { }
        public StepResult(bool applied, bool skipped, bool accumulating, double norm, double reduceWaitSeconds,
                          double updateSeconds, double postUpdateSeconds)
            : this(applied, skipped, accumulating, norm, reduceWaitSeconds, updateSeconds, postUpdateSeconds, 0) { }
        public StepResult(bool applied, bool skipped, bool accumulating, double norm, double reduceWaitSeconds,
                          double updateSeconds, double postUpdateSeconds, long bytesSent)
        {
            Applied = applied; SkippedNonFinite = skipped; Accumulating = accumulating; GradNorm = norm;
            ReduceWaitSeconds = reduceWaitSeconds; UpdateSeconds = updateSeconds; PostUpdateSeconds = postUpdateSeconds;
            BytesSent = bytesSent;
        }
        /// <summary>Bytes this rank moved over the optimizer's communicators since the previous step returned.</summary>
        public long BytesSent { get; }
        public bool Applied { get; }
        public bool SkippedNonFinite { get; }
        public bool Accumulating { get; }
        public double GradNorm { get; }
        /// <summary>Where Step() spent its time, in seconds: waiting for gradient reductions, the update, the
        /// collectives after it (ZeRO parameter allgather, Local SGD averaging).</summary>
        public double ReduceWaitSeconds { get; }
        public double UpdateSeconds { get; }
        public double PostUpdateSeconds { get; }
    }

    /// <summary>The model of Optimize(): the mean loss over the sample indices at the parameters, with the mean
    /// gradient written into gradient (zeroed on entry). Spans view the library's memory during the call.</summary>
    public delegate double GradientModel(ReadOnlySpan<float> parameters, Span<float> gradient, ReadOnlySpan<long> samples);
    /// <summary>GradientModel for either element type.</summary>
    public delegate double GradientModel<T>(ReadOnlySpan<T> parameters, Span<T> gradient, ReadOnlySpan<long> samples) where T : struct;

    public interface IShardedOptimizer : IDisposable
    {
        int Rank { get; }
        int WorldSize { get; }
        Optimizer WrappedOptimizer { get; }
        ShardingConfiguration ShardingConfiguration { get; }
        void SynchronizeOptimizerState();
        OptimizationResult Optimize(GradientModel model, OptimizationInputData inputData);
        bool ShouldEarlyStop();
        OptimizerOptions GetOptions();
        byte[] Serialize();
        void Deserialize(byte[] data);
        void SaveModel(string path);
        void LoadModel(string path);
    }

    /// <summary>A sharded optimizer over a base optimizer. Initialize (or the first Optimize(inputData)) is
    /// collective and checked: every rank must pass the same layout and options (else every rank fails naming
    /// the first difference), and the initial parameters are rank 0's unless
    /// ShardingConfiguration.BroadcastInitialParameters is false. The element type is float here, T in
    /// ShardedOptimizer&lt;T&gt;.</summary>
    public abstract class ShardedOptimizer : IShardedOptimizer
    {
        readonly int strategy;
        internal readonly int DType;
        SWIGTYPE_p_shardopt_optimizer_s handle;
        GCHandle external; // the caller's pinned parameter array
        bool disposed;
        long viewEpoch;
        double pushedOptionsLr = double.NaN;
        // what Reset() re-creates the native optimizer from
        ParameterLayout lastLayout;
        Array lastInitial;

        protected ShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration configuration, int strategy)
            : this(wrappedOptimizer, configuration, strategy, shardopt_native.SHARDOPT_F32) { }

        internal ShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration configuration, int strategy, int dtype)
        {
            WrappedOptimizer = wrappedOptimizer ?? throw new ArgumentNullException(nameof(wrappedOptimizer));
            ShardingConfiguration = configuration ?? throw new ArgumentNullException(nameof(configuration));
            this.strategy = strategy;
            DType = dtype;
            ShardingOptions().Dispose(); // validates the configuration now
        }

        internal shardopt_sharding_options ShardingOptions()
        {
            var s = new shardopt_sharding_options();
            shardopt_native.so_sharding_options_defaults(s);
            s.strategy = strategy;
            var c = ShardingConfiguration;
            if (!c.AutoSyncGradients)
            {
                if (strategy != shardopt_native.SHARDOPT_DDP && strategy != shardopt_native.SHARDOPT_ZERO1 && strategy != shardopt_native.SHARDOPT_LOCAL_SGD)
                {
                    s.Dispose();
                    throw new ArgumentException($"AutoSyncGradients=false (Local SGD) needs replicated parameters; {GetType().Name} reduces gradients every step");
                }
                s.strategy = shardopt_native.SHARDOPT_LOCAL_SGD;
            }
            s.local_sgd_period = c.LocalSteps;
            s.gradient_accumulation_steps = c.GradientAccumulationSteps;
            s.max_grad_norm = c.MaxGradNorm;
            s.broadcast_initial = c.BroadcastInitialParameters ? shardopt_native.SHARDOPT_ENABLE : shardopt_native.SHARDOPT_DISABLE;
            if (c.EnableGradientCompression) s.compression = (int)c.GradientCompression;
            s.compression_ratio = c.CompressionRatio;
            s.power_sgd_rank = c.PowerSgdRank;
            s.error_feedback = c.ErrorFeedback ? shardopt_native.SHARDOPT_ENABLE : shardopt_native.SHARDOPT_DISABLE;
            s.cpu_offload_optimizer = c.CpuOffloadOptimizer ? shardopt_native.SHARDOPT_ENABLE : shardopt_native.SHARDOPT_DISABLE;
            s.cpu_offload_gradients = c.CpuOffloadGradients ? shardopt_native.SHARDOPT_ENABLE : shardopt_native.SHARDOPT_DISABLE;
            s.cpu_offload_params = c.CpuOffloadParams ? shardopt_native.SHARDOPT_ENABLE : shardopt_native.SHARDOPT_DISABLE;
            Configure(s);
            return s;
        }

        internal virtual void Configure(shardopt_sharding_options s) { }
        /// <summary>Subclasses' collective set-up of the native optimizer just created (ElasticOptimizer).</summary>
        internal virtual void Created(SWIGTYPE_p_shardopt_optimizer_s native) { }

        public Optimizer WrappedOptimizer { get; }
        public ShardingConfiguration ShardingConfiguration { get; }
        public int Rank => ShardingConfiguration.CommunicationBackend.Rank;
        public int WorldSize => ShardingConfiguration.CommunicationBackend.WorldSize;
        public OptimizerOptions GetOptions() => WrappedOptimizer.Options;
        public bool IsInitialized => handle != null;
        /// <summary>The element type: typeof(float) or typeof(double).</summary>
        public Type ElementType => DType == shardopt_native.SHARDOPT_F64 ? typeof(double) : typeof(float);
        /// <summary>Applied per epoch by Optimize(OptimizationInputData); null = constant.</summary>
        public LearningRateSchedule LearningRateSchedule { get; set; }

        internal SWIGTYPE_p_shardopt_optimizer_s H
        {
            get
            {
                if (disposed) throw new ObjectDisposedException(GetType().Name, "the optimizer was disposed");
                if (handle == null) throw new InvalidOperationException("the optimizer is not initialized: call Initialize(layout, initial) or Optimize(inputData) first");
                return handle;
            }
        }

        // ---- views ----
        internal long ViewEpoch => viewEpoch;
        internal bool ViewValid(long epoch) => !disposed && handle != null && (epoch < 0 || epoch == viewEpoch);
        internal void CheckView(long epoch)
        {
            if (disposed || handle == null)
                throw new ObjectDisposedException(GetType().Name, "this view's optimizer was disposed (or reset); its memory is gone");
            if (epoch >= 0 && epoch != viewEpoch)
                throw new ObjectDisposedException(GetType().Name, "this gradient/gathered view expired (GradReady, ZeroGrad, Step, Release or Optimize since): get a new one");
        }
        void Expire() => ++viewEpoch;

        internal void CheckType<T>(string what) where T : struct
        {
            int dt = Elem<T>.Check();
            if (dt != DType)
                throw new ArgumentException($"{what}: this optimizer's elements are {DTypes.Name(DType)}, got {typeof(T).Name} (use {GetType().Name.Split('`')[0]}<{(typeof(T) == typeof(double) ? "double" : "float")}> for {typeof(T).Name} elements)");
        }

        // ---- creation ----
        /// <summary>Collective: creates this rank's native optimizer. parameters (optional): the caller's array of
        /// PaddedCountFor(layout) elements, pinned and updated in place (DDP, ZeRO-1, ZeRO-2, Local SGD).</summary>
        public ShardedOptimizer Initialize(ParameterLayout layout, float[] initial = null, float[] parameters = null) => InitializeT(layout, initial, parameters);

        internal unsafe ShardedOptimizer InitializeT<T>(ParameterLayout layout, T[] initial, T[] parameters) where T : struct
        {
            if (disposed) throw new ObjectDisposedException(GetType().Name);
            if (layout == null) throw new ArgumentNullException(nameof(layout));
            CheckType<T>("Initialize");
            if (handle != null) throw new InvalidOperationException("the optimizer is already initialized");
            if (initial != null && initial.Length != layout.ElementCount)
                throw new ArgumentException($"initial has {initial.Length} elements; the layout has {layout.ElementCount}", nameof(initial));
            if (parameters != null)
            {
                long padded = PaddedCountFor(layout);
                if (parameters.Length != padded)
                    throw new ArgumentException($"parameters has {parameters.Length} elements; it must hold PaddedCountFor(layout) = {padded}", nameof(parameters));
            }
            using (var opts = WrappedOptimizer.Options.Copy())
            using (var s = ShardingOptions())
            {
                if (ShardingConfiguration.LearningRate.HasValue) opts.lr = ShardingConfiguration.LearningRate.Value;
                var p = layout.ToNative(ShardingConfiguration.MinimumParameterGroupSize, DType);
                GCHandle init = initial != null ? GCHandle.Alloc(initial, GCHandleType.Pinned) : default(GCHandle);
                try
                {
                    var initPtr = initial != null ? init.AddrOfPinnedObject() : IntPtr.Zero;
                    var comm = ShardingConfiguration.CommunicationBackend.Handle;
                    if (parameters != null)
                    {
                        var pin = GCHandle.Alloc(parameters, GCHandleType.Pinned);
                        try { handle = shardopt_native.so_optimizer_create_external(comm, p, opts, s, initPtr, pin.AddrOfPinnedObject(), (ulong)parameters.Length); }
                        catch { pin.Free(); throw; }
                        external = pin;
                    }
                    else handle = shardopt_native.so_optimizer_create(comm, p, opts, s, initPtr);
                    try { Created(handle); }
                    catch { DestroyNative(); throw; }
                    pushedOptionsLr = WrappedOptimizer.Options.LearningRate;
                    lastLayout = layout;
                    lastInitial = initial == null ? null : (T[])initial.Clone();
                }
                finally
                {
                    if (init.IsAllocated) init.Free();
                    shardopt_native.so_params_destroy(p);
                }
            }
            return this;
        }

        public long PaddedCountFor(ParameterLayout layout)
        {
            if (layout == null) throw new ArgumentNullException(nameof(layout));
            var p = layout.ToNative(ShardingConfiguration.MinimumParameterGroupSize, DType);
            try { return (long)shardopt_native.so_params_padded_count(p, WorldSize); }
            finally { shardopt_native.so_params_destroy(p); }
        }

        /// <summary>AiDotNet's Reset(): collective; back to the initial parameters with fresh optimizer state
        /// (re-creates the native optimizer from the last Initialize's layout and initial values).</summary>
        public void Reset()
        {
            if (disposed) throw new ObjectDisposedException(GetType().Name);
            if (handle == null) return;
            var layout = lastLayout;
            var initial = lastInitial;
            DestroyNative();
            if (DType == shardopt_native.SHARDOPT_F64) InitializeT(layout, (double[])initial, null);
            else InitializeT(layout, (float[])initial, null);
            History = new List<double>();
        }

        public void SynchronizeOptimizerState() => shardopt_native.so_synchronize_state(H);

        // ---- early stopping ----
        internal List<double> History = new List<double>();
        /// <summary>AiDotNet's ShouldEarlyStop(), collective: true on every rank when any rank's options say stop
        /// (UseEarlyStopping, and the score of the last Optimize has not improved by more than Tolerance over
        /// its best for EarlyStoppingPatience epochs).</summary>
        public bool ShouldEarlyStop() => ShouldEarlyStop(LocalWantsStop());
        /// <summary>Collective: true on every rank when any rank votes true.</summary>
        public bool ShouldEarlyStop(bool vote) => shardopt_native.so_should_early_stop(H, vote ? 1 : 0) != 0;

        internal bool LocalWantsStop()
        {
            var o = WrappedOptimizer.Options;
            if (!o.UseEarlyStopping || o.EarlyStoppingPatience < 1 || History.Count <= o.EarlyStoppingPatience) return false;
            int bestAt = 0;
            for (int i = 1; i < History.Count; ++i) if (History[i] < History[bestAt] - o.Tolerance) bestAt = i;
            return History.Count - 1 - bestAt >= o.EarlyStoppingPatience;
        }

        // ---- learning rate ----
        /// <summary>The rate the next step uses, read from the library (after a load: the checkpoint's); set is live.</summary>
        public double LearningRate
        {
            get => shardopt_native.so_learning_rate(H);
            set => SetLearningRate(value);
        }
        public void SetLearningRate(double lr) { shardopt_native.so_set_learning_rate(H, lr); }

        // GetOptions().LearningRate changed since Initialize (or the last sync): the next step uses it.
        internal void SyncOptionsLearningRate()
        {
            double lr = WrappedOptimizer.Options.LearningRate;
            if (!lr.Equals(pushedOptionsLr)) { SetLearningRate(lr); pushedOptionsLr = lr; }
        }

        // ---- optimize (the callback form) ----
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int NativeModel(IntPtr user, IntPtr parameters, IntPtr gradient, IntPtr samples, UIntPtr count, out double loss);

        public OptimizationResult Optimize(GradientModel model, OptimizationInputData inputData)
        {
            if (model == null) throw new ArgumentNullException(nameof(model));
            var r = OptimizeT<float>((p, g, s) => model(p, g, s), inputData, out float[] best);
            r.BestSolution = best;
            return r;
        }

        internal unsafe OptimizationResult OptimizeT<T>(GradientModel<T> model, OptimizationInputData inputData, out T[] best) where T : struct
        {
            if (model == null) throw new ArgumentNullException(nameof(model));
            if (inputData == null) throw new ArgumentNullException(nameof(inputData));
            CheckType<T>("Optimize");
            var h = H;
            SyncOptionsLearningRate();
            Expire();
            int n = (int)ElementCount;
            Exception failure = null;
            NativeModel trampoline = (IntPtr user, IntPtr p, IntPtr g, IntPtr s, UIntPtr count, out double loss) =>
            {
                loss = 0;
                try
                {
                    loss = model(new ReadOnlySpan<T>((void*)p, n), new Span<T>((void*)g, n), new ReadOnlySpan<long>((void*)s, (int)count));
                    return 0;
                }
                catch (Exception e) // never unwind through native frames; every rank's error names this one
                {
                    failure = failure ?? e;
                    try { shardopt_native.so_cs_model_error($"{e.GetType().FullName}: {e.Message}"); } catch { }
                    return 1;
                }
            };
            best = new T[n];
            var history = new double[Math.Max(inputData.Epochs, 1) + 1];
            var bestPin = GCHandle.Alloc(best, GCHandleType.Pinned);
            try
            {
                using (var o = new shardopt_optimize_options())
                using (var r = new shardopt_optimize_result())
                {
                    shardopt_native.so_optimize_options_defaults(o);
                    o.num_samples = inputData.NumSamples; o.batch_size = inputData.BatchSize; o.epochs = inputData.Epochs;
                    o.max_iterations = inputData.MaxIterations; o.patience = inputData.Patience; o.min_delta = inputData.MinDelta;
                    o.shuffle = inputData.Shuffle ? shardopt_native.SHARDOPT_ENABLE : shardopt_native.SHARDOPT_DISABLE;
                    o.seed = inputData.Seed; o.first_epoch = inputData.FirstEpoch;
                    fixed (double* hp = history)
                    {
                        try
                        {
                            shardopt_native.so_optimize_fn(h, Marshal.GetFunctionPointerForDelegate(trampoline), IntPtr.Zero, o, r,
                                                           bestPin.AddrOfPinnedObject(), (ulong)n, (IntPtr)hp, (ulong)history.Length);
                        }
                        catch (InvalidOperationException) when (failure != null)
                        {
                            System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(failure).Throw();
                        }
                        GC.KeepAlive(trampoline);
                    }
                    var hist = new double[Math.Min((long)r.loss_history_count, history.Length)];
                    Array.Copy(history, hist, hist.Length);
                    return new OptimizationResult { BestFitnessScore = r.best_loss, Iterations = r.iterations,
                                                    FitnessHistory = hist, StoppedEarly = r.stopped_early != 0 };
                }
            }
            finally { bestPin.Free(); }
        }

        // ---- checkpoints (collective: every rank calls with the same arguments) ----
        /// <summary>The consolidated checkpoint (parameters, optimizer state, step count), identical on every rank.</summary>
        public unsafe byte[] Serialize()
        {
            ulong n = shardopt_native.so_serialize(H);
            byte[] data;
            try
            {
                if (n > int.MaxValue) throw new OutOfMemoryException($"the checkpoint ({n} bytes) does not fit in a byte[]");
                data = new byte[n];
            }
            catch
            {
                shardopt_native.so_serialized_discard();
                throw;
            }
            fixed (byte* p = data) shardopt_native.so_serialized_take((IntPtr)p, n);
            return data;
        }

        /// <summary>Loads bytes from Serialize (every rank the same bytes); IOException when they are corrupt,
        /// ArgumentException for another layout. A failed load changes nothing.</summary>
        public unsafe void Deserialize(byte[] data)
        {
            if (data == null) throw new ArgumentNullException(nameof(data));
            var h = H;
            Expire();
            byte none = 0; // an empty array pins as null; pass empty bytes, not "no bytes"
            fixed (byte* p = data) shardopt_native.so_deserialize(h, (IntPtr)(data.Length > 0 ? p : &none), (ulong)data.Length);
            pushedOptionsLr = WrappedOptimizer.Options.LearningRate; // the checkpoint's rate wins until the options change
        }

        /// <summary>Saves a sharded checkpoint (every rank writes its shard) into directory path, created if missing.</summary>
        public void SaveModel(string path) => SaveModel(path, false);

        /// <summary>Saves into directory path: sharded, or consolidated (rank 0 writes one file) when consolidated.</summary>
        public void SaveModel(string path, bool consolidated)
        {
            if (path == null) throw new ArgumentNullException(nameof(path));
            shardopt_native.so_save(H, path, consolidated ? 1 : 0);
        }

        /// <summary>Loads a checkpoint of either form, saved by any strategy and world size; IOException when it
        /// is missing, unreadable or corrupt.</summary>
        public void LoadModel(string path)
        {
            if (path == null) throw new ArgumentNullException(nameof(path));
            var h = H;
            Expire();
            shardopt_native.so_load(h, path);
            pushedOptionsLr = WrappedOptimizer.Options.LearningRate;
        }

        // ---- layout ----
        public int TensorCount => shardopt_native.so_tensor_count(H);
        public int BucketCount => shardopt_native.so_bucket_count(H);
        public long TensorSize(int tensor) => (long)shardopt_native.so_tensor_size(H, tensor);
        public int TensorBucket(int tensor) => shardopt_native.so_tensor_bucket(H, tensor);
        public long BucketSize(int bucket) => (long)shardopt_native.so_bucket_size(H, bucket);
        public long ElementCount => (long)shardopt_native.so_element_count(H);
        public long PaddedCount => (long)shardopt_native.so_padded_count(H);

        // ---- parameters ----
        /// <summary>The full flat (padded) parameter buffer, valid until Dispose; not for FSDP (sharded at rest).</summary>
        public NativeView<float> Parameters => ParametersT<float>();
        internal NativeView<T> ParametersT<T>() where T : struct
        {
            CheckType<T>("Parameters");
            var h = H;
            var p = shardopt_native.so_parameters(h, (ulong)Elem<T>.Size);
            return new NativeView<T>(this, p, (int)PaddedCount, false);
        }
        public void GetParameters(Span<float> packed) => GetParametersT<float>(packed);
        public float[] GetParameters() { var a = new float[ElementCount]; GetParameters(a); return a; }
        public void SetParameters(ReadOnlySpan<float> packed) => SetParametersT<float>(packed);

        internal unsafe void GetParametersT<T>(Span<T> packed) where T : struct
        {
            CheckType<T>("GetParameters");
            var h = H;
            long n = ElementCount;
            if (packed.Length != n) throw new ArgumentException($"GetParameters: the destination holds {packed.Length} elements; the model has {n}", nameof(packed));
            var b = MemoryMarshal.AsBytes(packed);
            fixed (byte* p = &MemoryMarshal.GetReference(b)) shardopt_native.so_get_parameters(h, (IntPtr)p, (ulong)packed.Length);
        }

        internal unsafe void SetParametersT<T>(ReadOnlySpan<T> packed) where T : struct
        {
            CheckType<T>("SetParameters");
            var h = H;
            long n = ElementCount;
            if (packed.Length != n) throw new ArgumentException($"SetParameters: got {packed.Length} elements; the model has {n}", nameof(packed));
            var b = MemoryMarshal.AsBytes(packed);
            fixed (byte* p = &MemoryMarshal.GetReference(b)) shardopt_native.so_set_parameters(h, (IntPtr)p, (ulong)packed.Length);
        }

        /// <summary>FSDP: the unit's full parameters (collective), valid until Release(bucket) or the next step.</summary>
        public NativeView<float> Gather(int bucket) => GatherT<float>(bucket);
        internal NativeView<T> GatherT<T>(int bucket) where T : struct
        {
            CheckType<T>("Gather");
            var h = H;
            var p = shardopt_native.so_gather(h, bucket, (ulong)Elem<T>.Size);
            return new NativeView<T>(this, p, (int)BucketSize(bucket), true);
        }
        public void Release(int bucket) { var h = H; Expire(); shardopt_native.so_release(h, bucket); }

        // ---- step protocol ----
        public long StepCount => shardopt_native.so_step_count(H);
        public void ZeroGrad() { var h = H; Expire(); shardopt_native.so_zero_grad(h); }
        /// <summary>The bucket's gradient, valid until GradReady, ZeroGrad or Step.</summary>
        public NativeView<float> BucketGradient(int bucket) => BucketGradientT<float>(bucket);
        public NativeView<float> TensorGradient(int tensor) => TensorGradientT<float>(tensor);
        internal NativeView<T> BucketGradientT<T>(int bucket) where T : struct
        {
            CheckType<T>("BucketGradient");
            var h = H;
            var p = shardopt_native.so_bucket_grad(h, bucket, (ulong)Elem<T>.Size);
            return new NativeView<T>(this, p, (int)BucketSize(bucket), true);
        }
        internal NativeView<T> TensorGradientT<T>(int tensor) where T : struct
        {
            CheckType<T>("TensorGradient");
            var h = H;
            var p = shardopt_native.so_tensor_grad(h, tensor, (ulong)Elem<T>.Size);
            return new NativeView<T>(this, p, (int)TensorSize(tensor), true);
        }
        public void GradReady(int bucket) { var h = H; Expire(); shardopt_native.so_grad_ready(h, bucket); }
        public StepResult Step()
        {
            var h = H;
            SyncOptionsLearningRate();
            Expire();
            using (var r = new shardopt_step_result())
            {
                shardopt_native.so_step(h, r);
                return new StepResult(r.applied != 0, r.skipped_nonfinite != 0, r.accumulating != 0, r.grad_norm,
                                      r.reduce_wait_seconds, r.update_seconds, r.post_update_seconds, (long)r.bytes_sent);
            }
        }

        /// <summary>Bytes this rank has moved over the optimizer's communicators since it was created (not collective).</summary>
        public long BytesSent => (long)shardopt_native.so_bytes_sent(H);

        /// <summary>Bytes this rank holds now (not collective); CompressionBytes: gradient compression's buffers.</summary>
        public MemoryStats GetMemoryStats()
        {
            var h = H;
            using (var m = new shardopt_memory_stats())
            {
                shardopt_native.so_memory_stats(h, m);
                return new MemoryStats((long)m.params_bytes, (long)m.grads_bytes, (long)m.optimizer_state_bytes, (long)m.buffer_bytes,
                                       (long)m.peak_buffer_bytes, (long)m.total_bytes, (long)m.compression_bytes)
                {
                    HostParamsBytes = (long)m.host_params_bytes, HostGradsBytes = (long)m.host_grads_bytes,
                    HostOptimizerStateBytes = (long)m.host_optimizer_state_bytes, HostTotalBytes = (long)m.host_total_bytes,
                };
            }
        }

        // ---- a PipelineRunner batch running natively on this optimizer (PipelineRunner.cs) ----
        bool pipelineRunning;
        internal void BeginPipelineBatch()
        {
            if (pipelineRunning) throw new InvalidOperationException("a pipeline batch is already running on this optimizer");
            SyncOptionsLearningRate();
            Expire();
            pipelineRunning = true;
        }
        internal void EndPipelineBatch() { pipelineRunning = false; Expire(); }
        void NotDuringPipelineBatch()
        {
            if (pipelineRunning)
                throw new InvalidOperationException($"not while a pipeline batch is running on this {GetType().Name} (called from a stage callback?)");
        }

        void DestroyNative()
        {
            NotDuringPipelineBatch();
            Expire();
            if (handle != null) { var h = handle; handle = null; shardopt_native.so_optimizer_destroy(h); }
            if (external.IsAllocated) external.Free();
        }

        public void Dispose()
        {
            NotDuringPipelineBatch();
            disposed = true;
            DestroyNative();
        }
    }

    /// <summary>A sharded optimizer of element type T (float or double; another T raises NotSupportedException).</summary>
    public abstract class ShardedOptimizer<T> : ShardedOptimizer where T : struct
    {
        internal ShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration configuration, int strategy)
            : base(wrappedOptimizer, configuration, strategy, Elem<T>.Check()) { }

        public ShardedOptimizer<T> Initialize(ParameterLayout layout, T[] initial = null, T[] parameters = null)
        {
            InitializeT(layout, initial, parameters);
            return this;
        }

        public new NativeView<T> Parameters => ParametersT<T>();
        public new T[] GetParameters() { var a = new T[ElementCount]; GetParametersT<T>(a); return a; }
        public void GetParameters(Span<T> packed) => GetParametersT(packed);
        public void SetParameters(ReadOnlySpan<T> packed) => SetParametersT(packed);
        public void SetParameters(T[] packed) { if (packed == null) throw new ArgumentNullException(nameof(packed)); SetParametersT<T>(packed); }
        public new NativeView<T> Gather(int bucket) => GatherT<T>(bucket);
        public new NativeView<T> BucketGradient(int bucket) => BucketGradientT<T>(bucket);
        public new NativeView<T> TensorGradient(int tensor) => TensorGradientT<T>(tensor);

        /// <summary>The callback form (lower level): the model sees library memory during each call.</summary>
        public OptimizationResult<T> Optimize(GradientModel<T> model, OptimizationInputData inputData)
        {
            var r = OptimizeT(model, inputData, out T[] best);
            return new OptimizationResult<T> { BestSolution = best, BestFitnessScore = r.BestFitnessScore, Iterations = r.Iterations,
                                               FitnessHistory = r.FitnessHistory, TrainingLossHistory = r.FitnessHistory,
                                               Epochs = r.FitnessHistory.Length, StoppedEarly = r.StoppedEarly };
        }

        /// <summary>AiDotNet's Optimize(inputData), collective: trains the wrapped optimizer's model on XTrain/YTrain
        /// (initializing from the model on the first call), one epoch at a time with the options' BatchSize,
        /// MaxIterations (epochs), ShuffleData/RandomSeed and LearningRateSchedule; the best solution is chosen on
        /// the validation loss when XValidation is given (else the epoch's training loss); early stopping as
        /// ShouldEarlyStop(). Reports training, validation and test losses of the best solution, and gives it to
        /// the model (SetParameters). A model exception on one rank fails every rank naming it.</summary>
        public OptimizationResult<T> Optimize<TInput, TOutput>(OptimizationInputData<T, TInput, TOutput> inputData)
        {
            if (inputData == null) throw new ArgumentNullException(nameof(inputData));
            var model = (WrappedOptimizer as IModelOptimizer<T, TInput, TOutput>)?.Model
                ?? throw new ArgumentException($"the wrapped optimizer carries no IGradientModel<{typeof(T).Name}, {typeof(TInput).Name}, {typeof(TOutput).Name}>: " +
                                               "build it as new AdamOptimizer<T, TInput, TOutput>(model, options), or use Optimize(GradientModel<T>, OptimizationInputData)");
            if (inputData.XTrain == null || inputData.YTrain == null) throw new ArgumentException("inputData needs XTrain and YTrain");
            if (!IsInitialized) InitializeT(model.GetParameterLayout(), model.GetParameters(), null);
            var o = WrappedOptimizer.Options;
            int nTrain = model.SampleCount(inputData.XTrain);
            bool hasVal = inputData.XValidation != null && inputData.YValidation != null;
            int epochs = Math.Max(o.MaxIterations, 1);
            SyncOptionsLearningRate();
            double baseLr = LearningRate;
            History = new List<double>();
            var train = new List<double>();
            T[] best = null;
            double bestScore = double.PositiveInfinity;
            long iterations = 0;
            bool stopped = false;
            GradientModel<T> step = (p, g, s) => model.ComputeLossAndGradient(p, g, inputData.XTrain, inputData.YTrain, s);
            for (int e = 0; e < epochs; ++e)
            {
                if (LearningRateSchedule != null) SetLearningRate(LearningRateSchedule.Rate(e, baseLr));
                // one epoch per call, numbered e for the shuffle order: the orders of one call over every epoch
                var r = OptimizeT(step, new OptimizationInputData { NumSamples = nTrain, BatchSize = o.BatchSize, Epochs = 1,
                                                                    Shuffle = o.ShuffleData, Seed = o.RandomSeed,
                                                                    FirstEpoch = e }, out T[] _);
                iterations += r.Iterations;
                if (r.FitnessHistory.Length == 0) continue; // an epoch an ElasticOptimizer's resume skipped
                train.Add(r.FitnessHistory[0]);
                var current = GetParameters();
                double score = hasVal ? Loss(model, current, inputData.XValidation, inputData.YValidation) : r.FitnessHistory[0];
                History.Add(score);
                if (best == null || score < bestScore - o.Tolerance) { best = current; bestScore = score; }
                if (e + 1 < epochs && ShouldEarlyStop()) { stopped = true; break; }
            }
            var result = new OptimizationResult<T> { BestSolution = best, BestFitnessScore = bestScore, Iterations = iterations,
                                                     Epochs = train.Count, FitnessHistory = History.ToArray(),
                                                     TrainingLossHistory = train.ToArray(), StoppedEarly = stopped };
            result.TrainingResult = Evaluate(model, best, inputData.XTrain, inputData.YTrain);
            if (hasVal) result.ValidationResult = Evaluate(model, best, inputData.XValidation, inputData.YValidation);
            if (inputData.XTest != null && inputData.YTest != null) result.TestResult = Evaluate(model, best, inputData.XTest, inputData.YTest);
            model.SetParameters((T[])best.Clone());
            return result;
        }

        static DatasetResult Evaluate<TInput, TOutput>(IGradientModel<T, TInput, TOutput> model, T[] parameters, TInput x, TOutput y) =>
            new DatasetResult { Loss = Loss(model, parameters, x, y), SampleCount = model.SampleCount(x) };

        static double Loss<TInput, TOutput>(IGradientModel<T, TInput, TOutput> model, T[] parameters, TInput x, TOutput y)
        {
            int n = model.SampleCount(x);
            var samples = new long[n];
            for (int i = 0; i < n; ++i) samples[i] = i;
            return model.ComputeLossAndGradient(parameters, new T[parameters.Length], x, y, samples);
        }
    }

    /// <summary>Data parallel: gradients averaged per bucket, full update on every rank.</summary>
    public class DDPOptimizer : ShardedOptimizer { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_DDP) { } }
    /// <summary>Optimizer state sharded; gradients all-reduced; parameters all-gathered after the step.</summary>
    public class ZeRO1Optimizer : ShardedOptimizer { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_ZERO1) { } }
    /// <summary>Optimizer state and gradients sharded (reduce-scatter per bucket).</summary>
    public class ZeRO2Optimizer : ShardedOptimizer { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_ZERO2) { } }
    /// <summary>Parameters, gradients and state sharded at rest (ZeRO-3).</summary>
    public class FSDPOptimizer : ShardedOptimizer { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_FSDP) { } }
    /// <summary>FSDPOptimizer under DeepSpeed's name.</summary>
    public class ZeRO3Optimizer : FSDPOptimizer { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    /// <summary>Local steps; parameters averaged every LocalSteps steps of the configuration.</summary>
    public class LocalSGDOptimizer : ShardedOptimizer { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_LOCAL_SGD) { } }

    /// <summary>A data x tensor x pipeline grid (dataParallelSize -1 = the rest), ZeRO-2 inside each data group.</summary>
    public class HybridShardedOptimizer : ShardedOptimizer
    {
        public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1,
                                      int tensorParallelSize = 1, int dataParallelSize = -1)
            : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_HYBRID)
        {
            PipelineParallelSize = pipelineParallelSize; TensorParallelSize = tensorParallelSize; DataParallelSize = dataParallelSize;
        }
        public int PipelineParallelSize { get; }
        public int TensorParallelSize { get; }
        public int DataParallelSize { get; }
        internal override void Configure(shardopt_sharding_options s) => Hybrid.Configure(s, PipelineParallelSize, TensorParallelSize, DataParallelSize);
    }

    /// <summary>AiDotNet's GradientCompressionOptimizer: data parallel (DDP) with compressed gradient reductions.
    /// useSparsification: TopK at compressionRatio (each chunk's largest-magnitude fraction); else useQuantization: Int8
    /// (blockwise, a scale per 256 elements); neither: no compression. When both are set, sparsification wins (the ratio
    /// only means something for it). The configuration's ErrorFeedback (true) applies; these arguments replace its
    /// EnableGradientCompression / GradientCompression. compressionRatio outside (0, 1] throws ArgumentException.</summary>
    public class GradientCompressionOptimizer : ShardedOptimizer
    {
        public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1,
                                            bool useQuantization = true, bool useSparsification = false)
            : base(wrappedOptimizer, config, CompressionArgs.DdpChecking(compressionRatio))
        {
            CompressionRatio = compressionRatio; UseQuantization = useQuantization; UseSparsification = useSparsification;
        }
        public double CompressionRatio { get; }
        public bool UseQuantization { get; }
        public bool UseSparsification { get; }
        /// <summary>The method in use: TopK, Int8 or None.</summary>
        public GradientCompression Compression => CompressionArgs.Method(UseQuantization, UseSparsification);
        internal override void Configure(shardopt_sharding_options s) => CompressionArgs.Configure(s, Compression, CompressionRatio);
    }

    internal static class CompressionArgs
    {
        // validates the ratio in the base(...) call, before the (virtual) Configure can see the fields
        internal static int DdpChecking(double ratio)
        {
            ShardingConfiguration.CheckRatio(ratio, "compressionRatio");
            return shardopt_native.SHARDOPT_DDP;
        }
        internal static GradientCompression Method(bool quantization, bool sparsification) =>
            sparsification ? GradientCompression.TopK : quantization ? GradientCompression.Int8 : GradientCompression.None;
        internal static void Configure(shardopt_sharding_options s, GradientCompression method, double ratio)
        {
            // also called by the base constructor's validation, before the fields are set: nothing is created then
            s.compression = (int)method;
            s.compression_ratio = ratio;
        }
    }

    /// <summary>Bytes one rank holds now, in its memory space (ShardedOptimizer.GetMemoryStats()).</summary>
    public sealed class MemoryStats
    {
        internal MemoryStats(long parameters, long gradients, long state, long buffers, long peakBuffers, long total, long compression)
        {
            ParamsBytes = parameters; GradsBytes = gradients; OptimizerStateBytes = state; BufferBytes = buffers;
            PeakBufferBytes = peakBuffers; TotalBytes = total; CompressionBytes = compression;
        }
        public long ParamsBytes { get; }
        public long GradsBytes { get; }
        public long OptimizerStateBytes { get; }
        public long BufferBytes { get; }
        public long PeakBufferBytes { get; }
        public long TotalBytes { get; }
        /// <summary>Gradient compression: error-feedback residuals, PowerSGD's Q matrices, payload buffers.</summary>
        public long CompressionBytes { get; }
        /// <summary>ZeRO-Offload's host memory beside the fields above (0 in host memory, where those are host memory).</summary>
        public long HostParamsBytes { get; internal set; }
        public long HostGradsBytes { get; internal set; }
        public long HostOptimizerStateBytes { get; internal set; }
        public long HostTotalBytes { get; internal set; }
    }

    internal static class Hybrid
    {
        internal static void Configure(shardopt_sharding_options s, int pp, int tp, int dp)
        {
            s.pipeline_parallel_size = pp; s.tensor_parallel_size = tp; s.data_parallel_size = dp;
            s.hybrid_data_strategy = shardopt_native.SHARDOPT_ZERO2; // the library's default is DDP
        }
    }

    // ---- AiDotNet's generic forms: element type T (float or double) ----
    public class DDPOptimizer<T> : ShardedOptimizer<T> where T : struct { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_DDP) { } }
    public class ZeRO1Optimizer<T> : ShardedOptimizer<T> where T : struct { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_ZERO1) { } }
    public class ZeRO2Optimizer<T> : ShardedOptimizer<T> where T : struct { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_ZERO2) { } }
    public class FSDPOptimizer<T> : ShardedOptimizer<T> where T : struct { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_FSDP) { } }
    public class ZeRO3Optimizer<T> : FSDPOptimizer<T> where T : struct { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class LocalSGDOptimizer<T> : ShardedOptimizer<T> where T : struct { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_LOCAL_SGD) { } }
    public class GradientCompressionOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1,
                                            bool useQuantization = true, bool useSparsification = false)
            : base(wrappedOptimizer, config, CompressionArgs.DdpChecking(compressionRatio))
        {
            CompressionRatio = compressionRatio; UseQuantization = useQuantization; UseSparsification = useSparsification;
        }
        public double CompressionRatio { get; }
        public bool UseQuantization { get; }
        public bool UseSparsification { get; }
        public GradientCompression Compression => CompressionArgs.Method(UseQuantization, UseSparsification);
        internal override void Configure(shardopt_sharding_options s) => CompressionArgs.Configure(s, Compression, CompressionRatio);
    }
    public class HybridShardedOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1,
                                      int tensorParallelSize = 1, int dataParallelSize = -1)
            : base(wrappedOptimizer, config, shardopt_native.SHARDOPT_HYBRID)
        {
            PipelineParallelSize = pipelineParallelSize; TensorParallelSize = tensorParallelSize; DataParallelSize = dataParallelSize;
        }
        public int PipelineParallelSize { get; }
        public int TensorParallelSize { get; }
        public int DataParallelSize { get; }
        internal override void Configure(shardopt_sharding_options s) => Hybrid.Configure(s, PipelineParallelSize, TensorParallelSize, DataParallelSize);
    }

    // AiDotNet's <T, TInput, TOutput> spelling (FSDPOptimizer<double, Tensor<double>, Tensor<double>>): the same
    // optimizers; Optimize(OptimizationInputData<T, TInput, TOutput>) trains the wrapped optimizer's model.
    public class DDPOptimizer<T, TInput, TOutput> : DDPOptimizer<T> where T : struct { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO1Optimizer<T, TInput, TOutput> : ZeRO1Optimizer<T> where T : struct { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO2Optimizer<T, TInput, TOutput> : ZeRO2Optimizer<T> where T : struct { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class FSDPOptimizer<T, TInput, TOutput> : FSDPOptimizer<T> where T : struct { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO3Optimizer<T, TInput, TOutput> : ZeRO3Optimizer<T> where T : struct { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class LocalSGDOptimizer<T, TInput, TOutput> : LocalSGDOptimizer<T> where T : struct { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class GradientCompressionOptimizer<T, TInput, TOutput> : GradientCompressionOptimizer<T> where T : struct
    {
        public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1,
                                            bool useQuantization = true, bool useSparsification = false)
            : base(wrappedOptimizer, config, compressionRatio, useQuantization, useSparsification) { }
    }
    public class HybridShardedOptimizer<T, TInput, TOutput> : HybridShardedOptimizer<T> where T : struct
    {
        public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1,
                                      int tensorParallelSize = 1, int dataParallelSize = -1)
            : base(wrappedOptimizer, config, pipelineParallelSize, tensorParallelSize, dataParallelSize) { }
    }
}
