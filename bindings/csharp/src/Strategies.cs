// AiDotNet's sharded optimizer classes, each a strategy of the C ABI, in three forms: element type T, AiDotNet's <T, TInput,
// TOutput>, and float without a type argument. Their settings are sharding option fields the library checks at once.
using System;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>The strategy inside a hybrid optimizer's data-parallel groups (values are the C ABI's shardopt_strategy).</summary>
    public enum DataParallelStrategy { DDP = 0, ZeRO1 = 1, ZeRO2 = 2, FSDP = 3 }

    /// <summary>DDP: gradients averaged per bucket, full update on every rank. ZeRO-1: optimizer state sharded, gradients
    /// all-reduced, parameters all-gathered after the step. ZeRO-2: also gradients sharded (reduce-scatter per bucket). FSDP
    /// (ZeRO-3, DeepSpeed's name): also parameters sharded at rest. Local SGD: parameters averaged every LocalSteps steps.</summary>
    public class DDPOptimizer<T> : ShardedOptimizer<T> where T : struct { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_DDP) { } }
    public class ZeRO1Optimizer<T> : ShardedOptimizer<T> where T : struct { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_ZERO1) { } }
    public class ZeRO2Optimizer<T> : ShardedOptimizer<T> where T : struct { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_ZERO2) { } }
    public class FSDPOptimizer<T> : ShardedOptimizer<T> where T : struct { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_FSDP) { } }
    public class ZeRO3Optimizer<T> : FSDPOptimizer<T> where T : struct { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class LocalSGDOptimizer<T> : ShardedOptimizer<T> where T : struct { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config, SHARDOPT_LOCAL_SGD) { } }

    /// <summary>A data x tensor x pipeline grid (dataParallelSize -1 = the rest of the world); dataStrategy inside each data
    /// group (null: the library's).</summary>
    public class HybridShardedOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1, int tensorParallelSize = 1,
                                      int dataParallelSize = -1, DataParallelStrategy? dataStrategy = null) : base(wrappedOptimizer, config, SHARDOPT_HYBRID, s =>
        {
            s.pipeline_parallel_size = pipelineParallelSize; s.tensor_parallel_size = tensorParallelSize; s.data_parallel_size = dataParallelSize;
            if (dataStrategy.HasValue) s.hybrid_data_strategy = (int)dataStrategy.Value;
        })
        { PipelineParallelSize = pipelineParallelSize; TensorParallelSize = tensorParallelSize; DataParallelSize = dataParallelSize; }
        public int PipelineParallelSize { get; }
        public int TensorParallelSize { get; }
        public int DataParallelSize { get; }
    }

    /// <summary>AiDotNet's GradientCompressionOptimizer: DDP with compressed gradient reductions: useSparsification, TopK at
    /// compressionRatio (it wins); else useQuantization, Int8; neither: none. The configuration's ErrorFeedback applies.</summary>
    public class GradientCompressionOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1, bool useQuantization = true,
                                            bool useSparsification = false) : base(wrappedOptimizer, config, SHARDOPT_DDP, s =>
        {
            s.compression = useSparsification ? SHARDOPT_COMPRESSION_TOP_K : useQuantization ? SHARDOPT_COMPRESSION_INT8 : SHARDOPT_COMPRESSION_NONE;
            s.compression_ratio = compressionRatio;
        })
        { CompressionRatio = compressionRatio; Compression = useSparsification ? GradientCompression.TopK : useQuantization ? GradientCompression.Int8 : GradientCompression.None; }
        public double CompressionRatio { get; }
        public GradientCompression Compression { get; }
    }

    /// <summary>AiDotNet's AsyncSGDOptimizer, asynchronous for real (docs/async_sgd.md): bounded-staleness data parallelism
    /// over a sharded parameter server; allowStaleness 0 is DDP's result bit for bit. Trains through Optimize; the step
    /// protocol throws NotSupportedException.</summary>
    public class AsyncSGDOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0)
            : base(wrappedOptimizer, config, SHARDOPT_ASYNC_SGD, s => s.async_staleness = allowStaleness) { AllowStaleness = allowStaleness; }
        public int AllowStaleness { get; }
    }

    /// <summary>AiDotNet's ElasticOptimizer, for real (docs/elastic.md): DDP training that checkpoints every CheckpointEvery
    /// steps (0: $SHARDOPT_CHECKPOINT_EVERY, else the library's) without stopping into CheckpointDirectory (shared by every
    /// rank; null: $SHARDOPT_CHECKPOINT_DIR), both set before Initialize, which resumes from the latest complete checkpoint
    /// there at whatever world size the job now has, from MinWorkers to MaxWorkers (else InvalidOperationException).
    /// ResumedStep, LastCheckpointStep: -1 for none; Generation: restarts before this run. Checkpoint() and
    /// FinishCheckpoint() (at the end) are collective.</summary>
    public class ElasticOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        readonly shardopt_elastic_options e = new shardopt_elastic_options();
        public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024) : base(wrappedOptimizer, config, SHARDOPT_DDP)
        {
            shardopt_elastic_options_init(e);
            e.min_workers = minWorkers;
            e.max_workers = maxWorkers;
            shardopt_elastic_options_validate_strict(e);
        }
        internal override void Created(SWIGTYPE_p_shardopt_optimizer_s native) => shardopt_optimizer_make_elastic(native, e);
        void Set(string name, Action<shardopt_elastic_options> set, Action<shardopt_elastic_options> undo)
        {
            if (IsInitialized) throw new InvalidOperationException($"{name} is set before Initialize");
            set(e);
            try { shardopt_elastic_options_validate_strict(e); } catch { undo(e); throw; }
        }
        V Status<V>(Func<shardopt_elastic_status, V> field) { using (var st = new shardopt_elastic_status { struct_size = SHARDOPT_SIZEOF_ELASTIC_STATUS }) { shardopt_optimizer_elastic_status(H, st); return field(st); } }
        public int MinWorkers => e.min_workers;
        public int MaxWorkers => e.max_workers;
        public string CheckpointDirectory
        {
            get => IsInitialized ? Status(st => st.checkpoint_dir) : e.checkpoint_dir;
            set { var old = e.checkpoint_dir; Set(nameof(CheckpointDirectory), o => o.checkpoint_dir = value, o => o.checkpoint_dir = old); }
        }
        public int CheckpointEvery
        {
            get => IsInitialized ? Status(st => st.checkpoint_every) : e.checkpoint_every;
            set { var old = e.checkpoint_every; Set(nameof(CheckpointEvery), o => o.checkpoint_every = value, o => o.checkpoint_every = old); }
        }
        public long ResumedStep => Status(st => st.resumed_step);
        public long LastCheckpointStep => Status(st => st.last_checkpoint_step);
        public bool CheckpointPending => Status(st => st.checkpoint_pending != 0);
        public int Generation => Status(st => st.generation);
        public long CheckpointsPublished => Status(st => st.checkpoints_published);
        public void Checkpoint() => shardopt_optimizer_checkpoint_now(H);
        public void FinishCheckpoint() => shardopt_optimizer_finish_checkpoint(H);
    }

    // ---- AiDotNet's <T, TInput, TOutput> spelling (FSDPOptimizer<double, Tensor<double>, Tensor<double>>) ----
    public class DDPOptimizer<T, TInput, TOutput> : DDPOptimizer<T> where T : struct { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO1Optimizer<T, TInput, TOutput> : ZeRO1Optimizer<T> where T : struct { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO2Optimizer<T, TInput, TOutput> : ZeRO2Optimizer<T> where T : struct { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class FSDPOptimizer<T, TInput, TOutput> : FSDPOptimizer<T> where T : struct { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO3Optimizer<T, TInput, TOutput> : ZeRO3Optimizer<T> where T : struct { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class LocalSGDOptimizer<T, TInput, TOutput> : LocalSGDOptimizer<T> where T : struct { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class HybridShardedOptimizer<T, TInput, TOutput> : HybridShardedOptimizer<T> where T : struct
    {   public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1, int tensorParallelSize = 1,
            int dataParallelSize = -1, DataParallelStrategy? dataStrategy = null) : base(wrappedOptimizer, config, pipelineParallelSize, tensorParallelSize, dataParallelSize, dataStrategy) { } }
    public class GradientCompressionOptimizer<T, TInput, TOutput> : GradientCompressionOptimizer<T> where T : struct
    {   public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1, bool useQuantization = true,
            bool useSparsification = false) : base(wrappedOptimizer, config, compressionRatio, useQuantization, useSparsification) { } }
    public class AsyncSGDOptimizer<T, TInput, TOutput> : AsyncSGDOptimizer<T> where T : struct
    { public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0) : base(wrappedOptimizer, config, allowStaleness) { } }
    public class ElasticOptimizer<T, TInput, TOutput> : ElasticOptimizer<T> where T : struct
    { public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024) : base(wrappedOptimizer, config, minWorkers, maxWorkers) { } }

    // ---- float, without a type argument ----
    public class DDPOptimizer : DDPOptimizer<float> { public DDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO1Optimizer : ZeRO1Optimizer<float> { public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO2Optimizer : ZeRO2Optimizer<float> { public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class FSDPOptimizer : FSDPOptimizer<float> { public FSDPOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class ZeRO3Optimizer : ZeRO3Optimizer<float> { public ZeRO3Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class LocalSGDOptimizer : LocalSGDOptimizer<float> { public LocalSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) : base(wrappedOptimizer, config) { } }
    public class HybridShardedOptimizer : HybridShardedOptimizer<float>
    {   public HybridShardedOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int pipelineParallelSize = 1, int tensorParallelSize = 1,
            int dataParallelSize = -1, DataParallelStrategy? dataStrategy = null) : base(wrappedOptimizer, config, pipelineParallelSize, tensorParallelSize, dataParallelSize, dataStrategy) { } }
    public class GradientCompressionOptimizer : GradientCompressionOptimizer<float>
    {   public GradientCompressionOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, double compressionRatio = 0.1, bool useQuantization = true,
            bool useSparsification = false) : base(wrappedOptimizer, config, compressionRatio, useQuantization, useSparsification) { } }
    public class AsyncSGDOptimizer : AsyncSGDOptimizer<float>
    { public AsyncSGDOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int allowStaleness = 0) : base(wrappedOptimizer, config, allowStaleness) { } }
    public class ElasticOptimizer : ElasticOptimizer<float>
    { public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024) : base(wrappedOptimizer, config, minWorkers, maxWorkers) { } }
}
