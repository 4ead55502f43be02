// AiDotNet's ShardingConfiguration over the C ABI's shardopt_sharding_options: the factories are the library's presets,
// the setters have the library check each value at once.
using System;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>How gradients are compressed on the wire (docs/compression.md; the C ABI's shardopt_compression). PowerSGD
    /// approximates the tensors declared as matrices (ParameterLayout.AddMatrix).</summary>
    public enum GradientCompression { None = 0, BF16 = 1, FP16 = 2, Int8 = 3, Int4 = 4, TopK = 5, PowerSGD = 6 }

    /// <summary>How a sharded optimizer communicates (AiDotNet's ShardingConfiguration), over shardopt_sharding_options filled by
    /// the library: the constructor and CreateDefault are its DEFAULT preset, the other factories its presets of the same
    /// names. A bad value (also a 0 where the C ABI reads 0 as its default: shardopt_sharding_options_validate_strict) is an
    /// ArgumentException naming the field, at once, and the old value stays. LearningRate, when set (null or 0: none),
    /// replaces the wrapped optimizer's. AutoSyncGradients = false turns DDP and ZeRO-1 into Local SGD (averaging every
    /// LocalSteps steps; the sharded optimizer classes refuse it). MinimumParameterGroupSize: gradient buckets (FSDP
    /// units) of about this many elements (0: the layout's own EndBucket buckets). EnableGradientCompression compresses every
    /// gradient reduction with GradientCompression (TopK sends the CompressionRatio of each chunk; ErrorFeedback keeps what
    /// compression missed for the next step). BroadcastInitialParameters: rank 0's initial parameters go to every rank of its
    /// data group. MaxGradNorm: global-norm clipping (0: off). CpuOffload*: ZeRO-Offload of an optimizer in CUDA memory
    /// (docs/offload.md); in host memory they change nothing.</summary>
    public class ShardingConfiguration
    {
        internal readonly shardopt_sharding_options Native;
        GradientCompression method; // what EnableGradientCompression turns on
        public ShardingConfiguration(CommunicationBackend backend, double? learningRate = null) : this(SHARDOPT_SHARDING_DEFAULT, backend) { if (learningRate.HasValue) LearningRate = learningRate; }
        internal ShardingConfiguration(int preset, CommunicationBackend backend)
        {
            CommunicationBackend = backend ?? throw new ArgumentNullException(nameof(backend));
            shardopt_sharding_options_init_preset(Native = new shardopt_sharding_options(), SHARDOPT_SIZEOF_SHARDING_OPTIONS, preset);
            method = (GradientCompression)Native.compression;
            if (method == GradientCompression.None) // the method of the preset that turns compression on
                using (var low = new shardopt_sharding_options())
                {
                    shardopt_sharding_options_init_preset(low, SHARDOPT_SIZEOF_SHARDING_OPTIONS, SHARDOPT_SHARDING_LOW_BANDWIDTH);
                    method = (GradientCompression)low.compression;
                }
        }
        public static ShardingConfiguration CreateDefault(CommunicationBackend backend) => new ShardingConfiguration(SHARDOPT_SHARDING_DEFAULT, backend);
        public static ShardingConfiguration CreateForHighBandwidth(CommunicationBackend backend) => new ShardingConfiguration(SHARDOPT_SHARDING_HIGH_BANDWIDTH, backend);
        public static ShardingConfiguration CreateForLowBandwidth(CommunicationBackend backend) => new ShardingConfiguration(SHARDOPT_SHARDING_LOW_BANDWIDTH, backend);
        public static ShardingConfiguration CreateForZeROOffload(CommunicationBackend backend) => new ShardingConfiguration(SHARDOPT_SHARDING_ZERO_OFFLOAD, backend);
        public static ShardingConfiguration CreateForZeROOffloadFull(CommunicationBackend backend) => new ShardingConfiguration(SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL, backend);
        void Set<V>(V old, V value, Action<V> set)
        {
            set(value);
            try { shardopt_sharding_options_validate_strict(Native); } catch { set(old); throw; }
        }
        static int Switch(bool on) => on ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
        public CommunicationBackend CommunicationBackend { get; }
        public double? LearningRate
        {
            get => Native.learning_rate > 0 ? Native.learning_rate : (double?)null;
            set => Set(Native.learning_rate, value ?? 0, v => Native.learning_rate = v);
        }
        public bool AutoSyncGradients { get => Native.auto_sync_gradients == SHARDOPT_ENABLE; set => Set(Native.auto_sync_gradients, Switch(value), v => Native.auto_sync_gradients = v); }
        public long MinimumParameterGroupSize { get => Native.parameter_group_size; set => Set(Native.parameter_group_size, value, v => Native.parameter_group_size = v); }
        public bool EnableGradientCompression { get => Native.compression != SHARDOPT_COMPRESSION_NONE; set => Native.compression = value ? (int)method : SHARDOPT_COMPRESSION_NONE; }
        public GradientCompression GradientCompression
        {
            get => method;
            set { bool on = EnableGradientCompression; Set(Native.compression, (int)value, v => Native.compression = v); method = value; EnableGradientCompression = on; }
        }
        public double CompressionRatio { get => Native.compression_ratio; set => Set(Native.compression_ratio, value, v => Native.compression_ratio = v); }
        public bool ErrorFeedback { get => Native.error_feedback == SHARDOPT_ENABLE; set => Set(Native.error_feedback, Switch(value), v => Native.error_feedback = v); }
        public int PowerSgdRank { get => Native.power_sgd_rank; set => Set(Native.power_sgd_rank, value, v => Native.power_sgd_rank = v); }
        public bool BroadcastInitialParameters { get => Native.broadcast_initial == SHARDOPT_ENABLE; set => Set(Native.broadcast_initial, Switch(value), v => Native.broadcast_initial = v); }
        public int LocalSteps { get => Native.local_sgd_period; set => Set(Native.local_sgd_period, value, v => Native.local_sgd_period = v); }
        public int GradientAccumulationSteps { get => Native.gradient_accumulation_steps; set => Set(Native.gradient_accumulation_steps, value, v => Native.gradient_accumulation_steps = v); }
        public double MaxGradNorm { get => Native.max_grad_norm; set => Set(Native.max_grad_norm, value, v => Native.max_grad_norm = v); }
        public bool CpuOffloadOptimizer { get => Native.cpu_offload_optimizer == SHARDOPT_ENABLE; set => Set(Native.cpu_offload_optimizer, Switch(value), v => Native.cpu_offload_optimizer = v); }
        public bool CpuOffloadGradients { get => Native.cpu_offload_gradients == SHARDOPT_ENABLE; set => Set(Native.cpu_offload_gradients, Switch(value), v => Native.cpu_offload_gradients = v); }
        public bool CpuOffloadParams { get => Native.cpu_offload_params == SHARDOPT_ENABLE; set => Set(Native.cpu_offload_params, Switch(value), v => Native.cpu_offload_params = v); }
    }

    /// <summary>AiDotNet's ShardingConfiguration&lt;T&gt; over a backend of element type T.</summary>
    public class ShardingConfiguration<T> : ShardingConfiguration where T : struct
    {
        public ShardingConfiguration(CommunicationBackend<T> backend, double? learningRate = null) : base(backend, learningRate) { }
        ShardingConfiguration(int preset, CommunicationBackend<T> backend) : base(preset, backend) { }
        public new CommunicationBackend<T> CommunicationBackend => (CommunicationBackend<T>)base.CommunicationBackend;
        public static ShardingConfiguration<T> CreateDefault(CommunicationBackend<T> backend) => new ShardingConfiguration<T>(SHARDOPT_SHARDING_DEFAULT, backend);
        public static ShardingConfiguration<T> CreateForHighBandwidth(CommunicationBackend<T> backend) => new ShardingConfiguration<T>(SHARDOPT_SHARDING_HIGH_BANDWIDTH, backend);
        public static ShardingConfiguration<T> CreateForLowBandwidth(CommunicationBackend<T> backend) => new ShardingConfiguration<T>(SHARDOPT_SHARDING_LOW_BANDWIDTH, backend);
        public static ShardingConfiguration<T> CreateForZeROOffload(CommunicationBackend<T> backend) => new ShardingConfiguration<T>(SHARDOPT_SHARDING_ZERO_OFFLOAD, backend);
        public static ShardingConfiguration<T> CreateForZeROOffloadFull(CommunicationBackend<T> backend) => new ShardingConfiguration<T>(SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL, backend);
    }
}
