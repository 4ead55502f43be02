// ElasticOptimizer: AiDotNet's ElasticOptimizer(wrapped, config, minWorkers = 1, maxWorkers = 1024), for real
// (docs/elastic.md): data parallel (DDP) training that checkpoints every CheckpointEvery steps without stopping
// (the state copied at the step boundary, written by background threads) into CheckpointDirectory (a directory
// every rank shares), and, when it is initialized, resumes from the latest complete checkpoint there at whatever
// world size the job now has, from MinWorkers to MaxWorkers. `shardopt-run --elastic --min N --max M
// --checkpoint-dir D` restarts the ranks with the survivors when one dies or a host is cut off.
using System;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>What the three ElasticOptimizer classes share: the arguments and the native calls.</summary>
    internal sealed class ElasticArgs
    {
        internal readonly int MinWorkers, MaxWorkers;
        internal string Directory;
        internal int Every;

        internal ElasticArgs(int minWorkers, int maxWorkers)
        {
            if (minWorkers < 1) throw new ArgumentException($"minWorkers must be at least 1 (got {minWorkers})", nameof(minWorkers));
            if (maxWorkers < minWorkers)
                throw new ArgumentException($"maxWorkers {maxWorkers} is below minWorkers {minWorkers}", nameof(maxWorkers));
            MinWorkers = minWorkers;
            MaxWorkers = maxWorkers;
        }

        // validates in the base(...) call, before the base constructor runs
        internal static int Ddp(ElasticArgs args) => shardopt_native.SHARDOPT_DDP;

        internal void MakeElastic(SWIGTYPE_p_shardopt_optimizer_s h) =>
            shardopt_native.so_make_elastic(h, MinWorkers, MaxWorkers, Every, Directory ?? "");

        internal static TField Status<TField>(SWIGTYPE_p_shardopt_optimizer_s h, Func<shardopt_elastic_status, TField> field)
        {
            using (var st = new shardopt_elastic_status())
            {
                shardopt_native.so_elastic_status(h, st);
                return field(st);
            }
        }

        internal void SetEvery(int value, bool initialized)
        {
            if (initialized) throw new InvalidOperationException("CheckpointEvery is set before Initialize");
            if (value < 0) throw new ArgumentException($"CheckpointEvery must be >= 0 (got {value})", nameof(value));
            Every = value;
        }

        internal void SetDirectory(string value, bool initialized)
        {
            if (initialized) throw new InvalidOperationException("CheckpointDirectory is set before Initialize");
            Directory = value;
        }
    }

    /// <summary>AiDotNet's ElasticOptimizer (float elements; see ElasticOptimizer&lt;T&gt;).</summary>
    public class ElasticOptimizer : ShardedOptimizer
    {
        readonly ElasticArgs args;

        public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024)
            : this(wrappedOptimizer, config, new ElasticArgs(minWorkers, maxWorkers)) { }
        ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ElasticArgs a)
            : base(wrappedOptimizer, config, ElasticArgs.Ddp(a)) { args = a; }

        internal override void Created(SWIGTYPE_p_shardopt_optimizer_s native) => args.MakeElastic(native);

        /// <summary>The world sizes the job may run at; Initialize throws InvalidOperationException outside them.</summary>
        public int MinWorkers => args.MinWorkers;
        public int MaxWorkers => args.MaxWorkers;
        /// <summary>Set before Initialize; null = $SHARDOPT_CHECKPOINT_DIR (shardopt-run --checkpoint-dir). Afterwards the
        /// directory in force.</summary>
        public string CheckpointDirectory { get => IsInitialized ? shardopt_native.so_elastic_dir(H) : args.Directory; set => args.SetDirectory(value, IsInitialized); }
        /// <summary>Steps between checkpoints, set before Initialize; 0 = $SHARDOPT_CHECKPOINT_EVERY, else 100.</summary>
        public int CheckpointEvery { get => IsInitialized ? ElasticArgs.Status(H, st => st.checkpoint_every) : args.Every; set => args.SetEvery(value, IsInitialized); }
        /// <summary>The step count loaded at Initialize; -1 when no checkpoint was there.</summary>
        public long ResumedStep => ElasticArgs.Status(H, st => st.resumed_step);
        /// <summary>The latest complete checkpoint's step count (published, or loaded); -1 for none.</summary>
        public long LastCheckpointStep => ElasticArgs.Status(H, st => st.last_checkpoint_step);
        public bool CheckpointPending => ElasticArgs.Status(H, st => st.checkpoint_pending != 0);
        /// <summary>Restarts of the job before this run ($SHARDOPT_ELASTIC_GENERATION; 0 without a launcher).</summary>
        public int Generation => ElasticArgs.Status(H, st => st.generation);
        public long CheckpointsPublished => ElasticArgs.Status(H, st => st.checkpoints_published);
        /// <summary>Collective: a checkpoint now, at a step boundary (the previous one finished first).</summary>
        public void Checkpoint() => shardopt_native.so_checkpoint_now(H);
        /// <summary>Collective: waits for the checkpoint being written and publishes it (call it at the end).</summary>
        public void FinishCheckpoint() => shardopt_native.so_finish_checkpoint(H);
    }

    /// <summary>AiDotNet's ElasticOptimizer of element type T (float or double).</summary>
    public class ElasticOptimizer<T> : ShardedOptimizer<T> where T : struct
    {
        readonly ElasticArgs args;

        public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024)
            : this(wrappedOptimizer, config, new ElasticArgs(minWorkers, maxWorkers)) { }
        ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ElasticArgs a)
            : base(wrappedOptimizer, config, ElasticArgs.Ddp(a)) { args = a; }

        internal override void Created(SWIGTYPE_p_shardopt_optimizer_s native) => args.MakeElastic(native);

        public int MinWorkers => args.MinWorkers;
        public int MaxWorkers => args.MaxWorkers;
        public string CheckpointDirectory { get => IsInitialized ? shardopt_native.so_elastic_dir(H) : args.Directory; set => args.SetDirectory(value, IsInitialized); }
        public int CheckpointEvery { get => IsInitialized ? ElasticArgs.Status(H, st => st.checkpoint_every) : args.Every; set => args.SetEvery(value, IsInitialized); }
        public long ResumedStep => ElasticArgs.Status(H, st => st.resumed_step);
        public long LastCheckpointStep => ElasticArgs.Status(H, st => st.last_checkpoint_step);
        public bool CheckpointPending => ElasticArgs.Status(H, st => st.checkpoint_pending != 0);
        public int Generation => ElasticArgs.Status(H, st => st.generation);
        public long CheckpointsPublished => ElasticArgs.Status(H, st => st.checkpoints_published);
        public void Checkpoint() => shardopt_native.so_checkpoint_now(H);
        public void FinishCheckpoint() => shardopt_native.so_finish_checkpoint(H);
    }

    /// <summary>AiDotNet's ElasticOptimizer&lt;T, TInput, TOutput&gt; spelling.</summary>
    public class ElasticOptimizer<T, TInput, TOutput> : ElasticOptimizer<T> where T : struct
    {
        public ElasticOptimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, int minWorkers = 1, int maxWorkers = 1024)
            : base(wrappedOptimizer, config, minWorkers, maxWorkers) { }
    }
}
