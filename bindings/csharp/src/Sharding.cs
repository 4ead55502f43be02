using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>The model's float32 tensors in order. EndBucket() closes a gradient bucket (an FSDP unit);
    /// otherwise tensors are grouped into buckets of MinimumParameterGroupSize elements.</summary>
    public sealed class ParameterLayout
    {
        readonly List<(string name, ulong count, bool tp, bool end)> tensors = new List<(string, ulong, bool, bool)>();

        public ParameterLayout Add(string name, long count, bool tensorParallelReplicated = false)
        {
            tensors.Add((name, (ulong)count, tensorParallelReplicated, false));
            return this;
        }

        public ParameterLayout EndBucket()
        {
            if (tensors.Count > 0) { var t = tensors[tensors.Count - 1]; t.end = true; tensors[tensors.Count - 1] = t; }
            return this;
        }

        public long ElementCount { get { ulong n = 0; foreach (var t in tensors) n += t.count; return (long)n; } }

        internal SWIGTYPE_p_shardopt_params_s ToNative(int bucketElements)
        {
            NativeInit.Ensure();
            var p = shardopt_native.so_params_create(shardopt_native.SHARDOPT_F32, (ulong)bucketElements * 4);
            try
            {
                foreach (var t in tensors)
                {
                    shardopt_native.so_params_add(p, t.name, t.count, t.tp ? 1 : 0);
                    if (t.end) shardopt_native.so_params_end_bucket(p);
                }
            }
            catch { shardopt_native.so_params_destroy(p); throw; }
            return p;
        }
    }

    /// <summary>How a sharded optimizer communicates (AiDotNet's ShardingConfiguration).
    /// LearningRate: when set, the steps use it; when null (AiDotNet: 0.01) the wrapped optimizer's rate is used.
    /// AutoSyncGradients=false turns DDP/ZeRO-1 into Local SGD (averaging every LocalSteps steps).
    /// MinimumParameterGroupSize: the gradient bucket (FSDP unit) size in elements.
    /// EnableGradientCompression: not in the C ABI yet; setting true throws NotSupportedException.</summary>
    public sealed class ShardingConfiguration
    {
        double? learningRate;
        int groupSize = 1024;

        public ShardingConfiguration(CommunicationBackend backend, double? learningRate = null)
        {
            CommunicationBackend = backend ?? throw new ArgumentNullException(nameof(backend));
            LearningRate = learningRate;
        }

        public static ShardingConfiguration CreateDefault(CommunicationBackend backend) => new ShardingConfiguration(backend);
        /// <summary>Small buckets (512 elements): more, earlier reductions overlapping the backward pass.</summary>
        public static ShardingConfiguration CreateForHighBandwidth(CommunicationBackend backend) =>
            new ShardingConfiguration(backend) { MinimumParameterGroupSize = 512 };
        /// <summary>Large buckets (4096 elements): fewer messages (no compression: shardopt has none yet).</summary>
        public static ShardingConfiguration CreateForLowBandwidth(CommunicationBackend backend) =>
            new ShardingConfiguration(backend) { MinimumParameterGroupSize = 4096 };

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
        public bool EnableGradientCompression
        {
            get => false;
            set { if (value) throw new NotSupportedException("gradient compression is not in the shardopt C ABI yet; use a larger MinimumParameterGroupSize for fewer messages"); }
        }
        public int LocalSteps { get; set; } = 4;
        public int GradientAccumulationSteps { get; set; } = 1;
        public double MaxGradNorm { get; set; }
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
        {
            Applied = applied; SkippedNonFinite = skipped; Accumulating = accumulating; GradNorm = norm;
            ReduceWaitSeconds = reduceWaitSeconds; UpdateSeconds = updateSeconds; PostUpdateSeconds = postUpdateSeconds;
        }
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

    /// <summary>A sharded optimizer over a base optimizer. Initialize (or the constructor taking a layout) is
    /// collective: every rank, same layout and initial values.</summary>
    public abstract class ShardedOptimizer : IShardedOptimizer
    {
        readonly int strategy;
        SWIGTYPE_p_shardopt_optimizer_s handle;
        GCHandle external; // the caller's pinned parameter array

        protected ShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration configuration, int strategy)
        {
            WrappedOptimizer = wrappedOptimizer ?? throw new ArgumentNullException(nameof(wrappedOptimizer));
            ShardingConfiguration = configuration ?? throw new ArgumentNullException(nameof(configuration));
            this.strategy = strategy;
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
            Configure(s);
            return s;
        }

        internal virtual void Configure(shardopt_sharding_options s) { }

        public Optimizer WrappedOptimizer { get; }
        public ShardingConfiguration ShardingConfiguration { get; }
        public int Rank => ShardingConfiguration.CommunicationBackend.Rank;
        public int WorldSize => ShardingConfiguration.CommunicationBackend.WorldSize;
        public OptimizerOptions GetOptions() => WrappedOptimizer.Options;
        public bool IsInitialized => handle != null;
        public double LearningRate { get; private set; }

        SWIGTYPE_p_shardopt_optimizer_s H
        {
            get { if (handle == null) throw new InvalidOperationException("the optimizer is not initialized (or was disposed)"); return handle; }
        }

        /// <summary>Collective: creates this rank's native optimizer. parameters (optional): the caller's array of
        /// PaddedCountFor(layout) elements, pinned and updated in place (DDP, ZeRO-1, ZeRO-2, Local SGD).</summary>
        public unsafe ShardedOptimizer Initialize(ParameterLayout layout, float[] initial = null, float[] parameters = null)
        {
            if (layout == null) throw new ArgumentNullException(nameof(layout));
            if (handle != null) throw new InvalidOperationException("the optimizer is already initialized");
            using (var opts = WrappedOptimizer.Options.Copy())
            using (var s = ShardingOptions())
            {
                if (ShardingConfiguration.LearningRate.HasValue) opts.lr = ShardingConfiguration.LearningRate.Value;
                var p = layout.ToNative(ShardingConfiguration.MinimumParameterGroupSize);
                try
                {
                    fixed (float* init = initial)
                    {
                        var comm = ShardingConfiguration.CommunicationBackend.Handle;
                        if (parameters != null)
                        {
                            var pin = GCHandle.Alloc(parameters, GCHandleType.Pinned);
                            try { handle = shardopt_native.so_optimizer_create_external(comm, p, opts, s, (IntPtr)init, pin.AddrOfPinnedObject(), (ulong)parameters.Length); }
                            catch { pin.Free(); throw; }
                            external = pin;
                        }
                        else handle = shardopt_native.so_optimizer_create(comm, p, opts, s, (IntPtr)init);
                    }
                    LearningRate = opts.lr;
                }
                finally { shardopt_native.so_params_destroy(p); }
            }
            return this;
        }

        public long PaddedCountFor(ParameterLayout layout)
        {
            var p = layout.ToNative(ShardingConfiguration.MinimumParameterGroupSize);
            try { return (long)shardopt_native.so_params_padded_count(p, WorldSize); }
            finally { shardopt_native.so_params_destroy(p); }
        }

        public void SynchronizeOptimizerState() => shardopt_native.so_synchronize_state(H);
        public bool ShouldEarlyStop() => ShouldEarlyStop(false);
        /// <summary>Collective: true on every rank when any rank votes true.</summary>
        public bool ShouldEarlyStop(bool vote) => shardopt_native.so_should_early_stop(H, vote ? 1 : 0) != 0;

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int NativeModel(IntPtr user, IntPtr parameters, IntPtr gradient, IntPtr samples, UIntPtr count, out double loss);

        public unsafe OptimizationResult Optimize(GradientModel model, OptimizationInputData inputData)
        {
            if (model == null) throw new ArgumentNullException(nameof(model));
            if (inputData == null) throw new ArgumentNullException(nameof(inputData));
            int n = (int)ElementCount;
            Exception failure = null;
            NativeModel trampoline = (IntPtr user, IntPtr p, IntPtr g, IntPtr s, UIntPtr count, out double loss) =>
            {
                loss = 0;
                try
                {
                    loss = model(new ReadOnlySpan<float>((void*)p, n), new Span<float>((void*)g, n),
                                 new ReadOnlySpan<long>((void*)s, (int)count));
                    return 0;
                }
                catch (Exception e) { failure = failure ?? e; return 1; } // never unwind through native frames
            };
            var best = new float[n];
            var history = new double[Math.Max(inputData.Epochs, 1) + 1];
            using (var o = new shardopt_optimize_options())
            using (var r = new shardopt_optimize_result())
            {
                shardopt_native.so_optimize_options_defaults(o);
                o.num_samples = inputData.NumSamples; o.batch_size = inputData.BatchSize; o.epochs = inputData.Epochs;
                o.max_iterations = inputData.MaxIterations; o.patience = inputData.Patience; o.min_delta = inputData.MinDelta;
                fixed (float* b = best)
                fixed (double* h = history)
                {
                    try
                    {
                        shardopt_native.so_optimize_fn(H, Marshal.GetFunctionPointerForDelegate(trampoline), IntPtr.Zero, o, r,
                                                       (IntPtr)b, (ulong)n, (IntPtr)h, (ulong)history.Length);
                    }
                    catch (InvalidOperationException) when (failure != null)
                    {
                        System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(failure).Throw();
                    }
                    GC.KeepAlive(trampoline);
                }
                var hist = new double[Math.Min((long)r.loss_history_count, history.Length)];
                Array.Copy(history, hist, hist.Length);
                return new OptimizationResult { BestSolution = best, BestFitnessScore = r.best_loss, Iterations = r.iterations,
                                                FitnessHistory = hist, StoppedEarly = r.stopped_early != 0 };
            }
        }

        // checkpoints (collective: every rank calls with the same arguments)
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
            byte none = 0; // an empty array pins as null; pass empty bytes, not "no bytes"
            fixed (byte* p = data) shardopt_native.so_deserialize(H, (IntPtr)(data.Length > 0 ? p : &none), (ulong)data.Length);
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
            shardopt_native.so_load(H, path);
        }

        // layout
        public int TensorCount => shardopt_native.so_tensor_count(H);
        public int BucketCount => shardopt_native.so_bucket_count(H);
        public long TensorSize(int tensor) => (long)shardopt_native.so_tensor_size(H, tensor);
        public int TensorBucket(int tensor) => shardopt_native.so_tensor_bucket(H, tensor);
        public long BucketSize(int bucket) => (long)shardopt_native.so_bucket_size(H, bucket);
        public long ElementCount => (long)shardopt_native.so_element_count(H);
        public long PaddedCount => (long)shardopt_native.so_padded_count(H);

        // parameters (views without copies are valid until the next step / Dispose)
        /// <summary>The full flat (padded) parameter buffer; not for FSDP (sharded at rest).</summary>
        public unsafe Span<float> Parameters => new Span<float>((void*)shardopt_native.so_parameters(H, 4), (int)PaddedCount);
        public unsafe void GetParameters(Span<float> packed)
        {
            fixed (float* p = &System.Runtime.InteropServices.MemoryMarshal.GetReference(packed)) shardopt_native.so_get_parameters(H, (IntPtr)p, (ulong)packed.Length);
        }
        public float[] GetParameters() { var a = new float[ElementCount]; GetParameters(a); return a; }
        public unsafe void SetParameters(ReadOnlySpan<float> packed)
        {
            fixed (float* p = &System.Runtime.InteropServices.MemoryMarshal.GetReference(packed)) shardopt_native.so_set_parameters(H, (IntPtr)p, (ulong)packed.Length);
        }
        /// <summary>FSDP: the unit's full parameters (collective), valid until Release(bucket).</summary>
        public unsafe Span<float> Gather(int bucket) => new Span<float>((void*)shardopt_native.so_gather(H, bucket, 4), (int)BucketSize(bucket));
        public void Release(int bucket) => shardopt_native.so_release(H, bucket);

        // step protocol
        public void SetLearningRate(double lr) { shardopt_native.so_set_learning_rate(H, lr); LearningRate = lr; }
        public long StepCount => shardopt_native.so_step_count(H);
        public void ZeroGrad() => shardopt_native.so_zero_grad(H);
        public unsafe Span<float> BucketGradient(int bucket)
        {
            var p = shardopt_native.so_bucket_grad(H, bucket, 4);
            return new Span<float>((void*)p, (int)BucketSize(bucket));
        }
        public unsafe Span<float> TensorGradient(int tensor)
        {
            var p = shardopt_native.so_tensor_grad(H, tensor, 4);
            return new Span<float>((void*)p, (int)TensorSize(tensor));
        }
        public void GradReady(int bucket) => shardopt_native.so_grad_ready(H, bucket);
        public StepResult Step()
        {
            using (var r = new shardopt_step_result())
            {
                shardopt_native.so_step(H, r);
                return new StepResult(r.applied != 0, r.skipped_nonfinite != 0, r.accumulating != 0, r.grad_norm,
                                      r.reduce_wait_seconds, r.update_seconds, r.post_update_seconds);
            }
        }

        public void Dispose()
        {
            if (handle != null) { var h = handle; handle = null; shardopt_native.so_optimizer_destroy(h); }
            if (external.IsAllocated) external.Free();
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
        internal override void Configure(shardopt_sharding_options s)
        {
            s.pipeline_parallel_size = PipelineParallelSize; s.tensor_parallel_size = TensorParallelSize; s.data_parallel_size = DataParallelSize;
            s.hybrid_data_strategy = shardopt_native.SHARDOPT_ZERO2; // the library's default is DDP
        }
    }
}
