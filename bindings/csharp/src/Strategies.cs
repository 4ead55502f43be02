// The sharded optimizer classes of AiDotNet.DistributedTraining, each a strategy of the C ABI, in three forms: float
// (ShardedOptimizer), element type T, and AiDotNet's <T, TInput, TOutput>. Their settings are sharding option fields
// the library checks when the object is built.
using System;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>The strategy inside a hybrid optimizer's data-parallel groups (values are the C ABI's shardopt_strategy).</summary>
    public enum DataParallelStrategy { DDP = 0, ZeRO1 = 1, ZeRO2 = 2, FSDP = 3 }

    internal static class Settings
    {
        internal static Action<shardopt_sharding_options> Hybrid(int pp, int tp, int dp, DataParallelStrategy? data) => s =>
        {
            s.pipeline_parallel_size = pp; s.tensor_parallel_size = tp; s.data_parallel_size = dp;
            if (data.HasValue) s.hybrid_data_strategy = (int)data.Value;
        };
        // AiDotNet's flags: sparsification (TopK at the ratio) wins over quantization (Int8)
        internal static GradientCompression Method(bool quantization, bool sparsification) =>
            sparsification ? GradientCompression.TopK : quantization ? GradientCompression.Int8 : GradientCompression.None;
        internal static Action<shardopt_sharding_options> Compression(double ratio, bool quantization, bool sparsification) => s =>
        {
            s.compression = (int)Method(quantization, sparsification);
            s.compression_ratio = Errors.NonZero(ratio, "compressionRatio");
        };
        internal static Action<shardopt_sharding_options> Async(int staleness) => s => s.async_staleness = staleness;
    }

    /// <summary>Data parallel: gradients averaged per bucket, full update on every rank.</summary>
    public class DDPOptimizer : ShardedOptimizer { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_DDP) { } }
    /// <summary>Optimizer state sharded; gradients all-reduced; parameters all-gathered after the step.</summary>
    public class ZeRO1Optimizer : ShardedOptimizer { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_ZERO1) { } }
    /// <summary>Optimizer state and gradients sharded (reduce-scatter per bucket).</summary>
    public class ZeRO2Optimizer : ShardedOptimizer { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_ZERO2) { } }
    /// <summary>Parameters, gradients and state sharded at rest (ZeRO-3).</summary>
    public class FSDPOptimizer : ShardedOptimizer { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_FSDP) { } }
    /// <summary>FSDPOptimizer under DeepSpeed's name.</summary>
    public class ZeRO3Optimizer : FSDPOptimizer { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    /// <summary>Local steps; parameters averaged every LocalSteps steps of the configuration.</summary>
    public class LocalSGDOptimizer : ShardedOptimizer { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_LOCAL_SGD) { } }

    /// <summary>A data x tensor x pipeline grid (dataParallelSize -1 = the rest of the world); dataStrategy inside each
    /// data group (null: the library's).</summary>
    public class HybridShardedOptimizer : ShardedOptimizer
    {
        public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1,
                                      int tensorParallelSize = 1, int dataParallelSize = -1, DataParallelStrategy? dataStrategy = null)
            : base(wrappedOptimizer, config, SHARDOPT_HYBRID, SHARDOPT_F32, Settings.Hybrid(pipelineParallelSize, tensorParallelSize, dataParallelSize, dataStrategy))
        { PipelineParallelSize = pipelineParallelSize; TensorParallelSize = tensorParallelSize; DataParallelSize = dataParallelSize; }
        public int PipelineParallelSize { get; }
        public int TensorParallelSize { get; }
        public int DataParallelSize { get; }
    }

    /// <summary>AiDotNet's GradientCompressionOptimizer: DDP with compressed gradient reductions: useSparsification,
    /// TopK at compressionRatio; else useQuantization, Int8; neither: none. The configuration's ErrorFeedback applies.</summary>
    public class GradientCompressionOptimizer : ShardedOptimizer
    {
        public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1,
                                            bool useQuantization = true, bool useSparsification = false)
            : base(wrappedOptimizer, config, SHARDOPT_DDP, SHARDOPT_F32, Settings.Compression(compressionRatio, useQuantization, useSparsification))
        { CompressionRatio = compressionRatio; Compression = Settings.Method(useQuantization, useSparsification); }
        public double CompressionRatio { get; }
        /// <summary>The method in use: TopK, Int8 or None.</summary>
        public GradientCompression Compression { get; }
    }

    /// <summary>AiDotNet's AsyncSGDOptimizer, asynchronous for real (docs/async_sgd.md): bounded-staleness data
    /// parallelism over a sharded parameter server; allowStaleness 0 is DDP's result bit for bit. Trains through
    /// Optimize; the step protocol throws NotSupportedException.</summary>
    public class AsyncSGDOptimizer : ShardedOptimizer
    {
        public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0)
            : base(wrappedOptimizer, config, SHARDOPT_ASYNC_SGD, SHARDOPT_F32, Settings.Async(allowStaleness)) { AllowStaleness = allowStaleness; }
        public int AllowStaleness { get; }
    }

    // ---- element type T ----
    public class DDPOptimizer<T> : ShardedOptimizer<T> where T : struct { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_DDP) { } }
    public class ZeRO1Optimizer<T> : ShardedOptimizer<T> where T : struct { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_ZERO1) { } }
    public class ZeRO2Optimizer<T> : ShardedOptimizer<T> where T : struct { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_ZERO2) { } }
    public class FSDPOptimizer<T> : ShardedOptimizer<T> where T : struct { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_FSDP) { } }
    public class ZeRO3Optimizer<T> : FSDPOptimizer<T> where T : struct { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class LocalSGDOptimizer<T> : ShardedOptimizer<T> where T : struct { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_LOCAL_SGD) { } }
    public class HybridShardedOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1,
                                      int tensorParallelSize = 1, int dataParallelSize = -1, DataParallelStrategy? dataStrategy = null)
            : base(wrappedOptimizer, config, SHARDOPT_HYBRID, Settings.Hybrid(pipelineParallelSize, tensorParallelSize, dataParallelSize, dataStrategy))
        { PipelineParallelSize = pipelineParallelSize; TensorParallelSize = tensorParallelSize; DataParallelSize = dataParallelSize; }
        public int PipelineParallelSize { get; }
        public int TensorParallelSize { get; }
        public int DataParallelSize { get; }
    }
    public class GradientCompressionOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1,
                                            bool useQuantization = true, bool useSparsification = false)
            : base(wrappedOptimizer, config, SHARDOPT_DDP, Settings.Compression(compressionRatio, useQuantization, useSparsification))
        { CompressionRatio = compressionRatio; Compression = Settings.Method(useQuantization, useSparsification); }
        public double CompressionRatio { get; }
        public GradientCompression Compression { get; }
    }
    public class AsyncSGDOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0)
            : base(wrappedOptimizer, config, SHARDOPT_ASYNC_SGD, Settings.Async(allowStaleness)) { AllowStaleness = allowStaleness; }
        public int AllowStaleness { get; }
    }

    // ---- AiDotNet's <T, TInput, TOutput> spelling (FSDPOptimizer<double, Tensor<double>, Tensor<double>>) ----
    public class DDPOptimizer<T, TInput, TOutput> : DDPOptimizer<T> where T : struct { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO1Optimizer<T, TInput, TOutput> : ZeRO1Optimizer<T> where T : struct { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO2Optimizer<T, TInput, TOutput> : ZeRO2Optimizer<T> where T : struct { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class FSDPOptimizer<T, TInput, TOutput> : FSDPOptimizer<T> where T : struct { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO3Optimizer<T, TInput, TOutput> : ZeRO3Optimizer<T> where T : struct { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class LocalSGDOptimizer<T, TInput, TOutput> : LocalSGDOptimizer<T> where T : struct { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class HybridShardedOptimizer<T, TInput, TOutput> : HybridShardedOptimizer<T> where T : struct
    {
        public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1,
                                      int tensorParallelSize = 1, int dataParallelSize = -1, DataParallelStrategy? dataStrategy = null)
            : base(wrappedOptimizer, config, pipelineParallelSize, tensorParallelSize, dataParallelSize, dataStrategy) { }
    }
    public class GradientCompressionOptimizer<T, TInput, TOutput> : GradientCompressionOptimizer<T> where T : struct
    {
        public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1,
                                            bool useQuantization = true, bool useSparsification = false)
            : base(wrappedOptimizer, config, compressionRatio, useQuantization, useSparsification) { }
    }
    public class AsyncSGDOptimizer<T, TInput, TOutput> : AsyncSGDOptimizer<T> where T : struct
    {
        public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0) : base(wrappedOptimizer, config, allowStaleness) { }
    }

    /// <summary>The elastic options of the three ElasticOptimizer classes (shardopt_elastic_options), checked by the
    /// library as they are set; set before Initialize, which makes the optimizer elastic.</summary>
    internal sealed class ElasticSettings
    {
        readonly shardopt_elastic_options native = new shardopt_elastic_options();

        internal ElasticSettings(int minWorkers, int maxWorkers)
        {
            shardopt_elastic_options_init(native);
            native.min_workers = Errors.NonZero(minWorkers, nameof(minWorkers));
            native.max_workers = Errors.NonZero(maxWorkers, nameof(maxWorkers));
            shardopt_elastic_options_validate(native);
        }

        internal int MinWorkers => native.min_workers;
        internal int MaxWorkers => native.max_workers;
        internal string Directory => native.checkpoint_dir;
        internal int Every => native.checkpoint_every;

        internal void Set(ShardedOptimizer owner, string name, Action<shardopt_elastic_options> set, Action<shardopt_elastic_options> undo)
        {
            if (owner.IsInitialized) throw new InvalidOperationException($"{name} is set before Initialize");
            set(native);
            try { shardopt_elastic_options_validate(native); } catch { undo(native); throw; }
        }

        internal void MakeElastic(SWIGTYPE_p_shardopt_optimizer_s h) => shardopt_optimizer_make_elastic(h, native);

        internal static V Status<V>(SWIGTYPE_p_shardopt_optimizer_s h, Func<shardopt_elastic_status, V> field)
        {
            using (var st = new shardopt_elastic_status { struct_size = SHARDOPT_SIZEOF_ELASTIC_STATUS })
            {
                shardopt_optimizer_elastic_status(h, st);
                return field(st);
            }
        }
    }

    /// <summary>AiDotNet's ElasticOptimizer, for real (docs/elastic.md): DDP training that checkpoints every
    /// CheckpointEvery steps without stopping into CheckpointDirectory (shared by every rank) and, at Initialize,
    /// resumes from the latest complete checkpoint there at whatever world size the job now has, from MinWorkers to
    /// MaxWorkers (else InvalidOperationException). `shardopt-run --elastic` restarts the ranks with the survivors.</summary>
    public class ElasticOptimizer : ShardedOptimizer
    {
        readonly ElasticSettings e;
        public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024)
            : base(wrappedOptimizer, config, SHARDOPT_DDP) { e = new ElasticSettings(minWorkers, maxWorkers); }
        internal override void Created(SWIGTYPE_p_shardopt_optimizer_s native) => e.MakeElastic(native);
        public int MinWorkers => e.MinWorkers;
        public int MaxWorkers => e.MaxWorkers;
        /// <summary>Set before Initialize; null: $SHARDOPT_CHECKPOINT_DIR. Afterwards the directory in force.</summary>
        public string CheckpointDirectory
        {
            get => IsInitialized ? ElasticSettings.Status(H, st => st.checkpoint_dir) : e.Directory;
            set { var old = e.Directory; e.Set(this, nameof(CheckpointDirectory), o => o.checkpoint_dir = value, o => o.checkpoint_dir = old); }
        }
        /// <summary>Steps between checkpoints, set before Initialize; 0: $SHARDOPT_CHECKPOINT_EVERY, else the library's.</summary>
        public int CheckpointEvery
        {
            get => IsInitialized ? ElasticSettings.Status(H, st => st.checkpoint_every) : e.Every;
            set { var old = e.Every; e.Set(this, nameof(CheckpointEvery), o => o.checkpoint_every = value, o => o.checkpoint_every = old); }
        }
        /// <summary>The step count loaded at Initialize; -1 when no checkpoint was there.</summary>
        public long ResumedStep => ElasticSettings.Status(H, st => st.resumed_step);
        /// <summary>The latest complete checkpoint's step count (published, or loaded); -1 for none.</summary>
        public long LastCheckpointStep => ElasticSettings.Status(H, st => st.last_checkpoint_step);
        public bool CheckpointPending => ElasticSettings.Status(H, st => st.checkpoint_pending != 0);
        /// <summary>Restarts of the job before this run ($SHARDOPT_ELASTIC_GENERATION; 0 without a launcher).</summary>
        public int Generation => ElasticSettings.Status(H, st => st.generation);
        public long CheckpointsPublished => ElasticSettings.Status(H, st => st.checkpoints_published);
        /// <summary>Collective: a checkpoint now, at a step boundary (the previous one finished first).</summary>
        public void Checkpoint() => shardopt_optimizer_checkpoint_now(H);
        /// <summary>Collective: waits for the checkpoint being written and publishes it (call it at the end).</summary>
        public void FinishCheckpoint() => shardopt_optimizer_finish_checkpoint(H);
    }

    /// <summary>AiDotNet's ElasticOptimizer of element type T.</summary>
    public class ElasticOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        readonly ElasticSettings e;
        public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024)
            : base(wrappedOptimizer, config, SHARDOPT_DDP) { e = new ElasticSettings(minWorkers, maxWorkers); }
        internal override void Created(SWIGTYPE_p_shardopt_optimizer_s native) => e.MakeElastic(native);
        public int MinWorkers => e.MinWorkers;
        public int MaxWorkers => e.MaxWorkers;
        public string CheckpointDirectory
        {
            get => IsInitialized ? ElasticSettings.Status(H, st => st.checkpoint_dir) : e.Directory;
            set { var old = e.Directory; e.Set(this, nameof(CheckpointDirectory), o => o.checkpoint_dir = value, o => o.checkpoint_dir = old); }
        }
        public int CheckpointEvery
        {
            get => IsInitialized ? ElasticSettings.Status(H, st => st.checkpoint_every) : e.Every;
            set { var old = e.Every; e.Set(this, nameof(CheckpointEvery), o => o.checkpoint_every = value, o => o.checkpoint_every = old); }
        }
        public long ResumedStep => ElasticSettings.Status(H, st => st.resumed_step);
        public long LastCheckpointStep => ElasticSettings.Status(H, st => st.last_checkpoint_step);
        public bool CheckpointPending => ElasticSettings.Status(H, st => st.checkpoint_pending != 0);
        public int Generation => ElasticSettings.Status(H, st => st.generation);
        public long CheckpointsPublished => ElasticSettings.Status(H, st => st.checkpoints_published);
        public void Checkpoint() => shardopt_optimizer_checkpoint_now(H);
        public void FinishCheckpoint() => shardopt_optimizer_finish_checkpoint(H);
    }

    public class ElasticOptimizer<T, TInput, TOutput> : ElasticOptimizer<T> where T : struct
    {
        public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024)
            : base(wrappedOptimizer, config, minWorkers, maxWorkers) { }
    }
}
