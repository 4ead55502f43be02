package org.shardopt;

import java.io.IOException;
import java.util.function.ToLongFunction;
import org.shardopt.internal.*;

/** AiDotNet's ElasticOptimizer(wrapped, config, minWorkers = 1, maxWorkers = 1024), for real (docs/elastic.md): data
 *  parallel training that checkpoints every getCheckpointEvery() steps without stopping into getCheckpointDirectory()
 *  (shared by every rank) and, when initialized, resumes from the latest complete checkpoint there at whatever world size
 *  the job has, from minWorkers to maxWorkers (else IllegalStateException). shardopt-run --elastic restarts the ranks. */
public class ElasticOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    /** The library's elastic options: each value checked by it as it is set (shardopt_elastic_options_validate_strict). */
    private final shardopt_elastic_options options = new shardopt_elastic_options();
    public ElasticOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { this(wrappedOptimizer, config, 1, 1024); }
    public ElasticOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int minWorkers, int maxWorkers) {
        super(wrappedOptimizer, config, strategy(shardopt_strategy.SHARDOPT_DDP));
        shardopt_native.shardopt_elastic_options_init(options);
        options.setMin_workers(minWorkers);
        options.setMax_workers(maxWorkers);
    }

    @Override void created(SWIGTYPE_p_shardopt_optimizer_s x) { shardopt_native.shardopt_optimizer_make_elastic(x, options); }
    public int getMinWorkers() { return options.getMin_workers(); }
    public int getMaxWorkers() { return options.getMax_workers(); }
    /** The directory in force once initialized; before, the one set (null: $SHARDOPT_CHECKPOINT_DIR). */
    public String getCheckpointDirectory() { return isInitialized() ? status().getCheckpoint_dir() : options.getCheckpoint_dir(); }
    /** Before initialize: where checkpoints go, a directory every rank shares (null: $SHARDOPT_CHECKPOINT_DIR). */
    public ElasticOptimizer<T, TInput, TOutput> setCheckpointDirectory(String dir) {
        beforeInitialize("setCheckpointDirectory").setCheckpoint_dir(dir);
        return this;
    }
    public int getCheckpointEvery() { return isInitialized() ? (int) status(shardopt_elastic_status::getCheckpoint_every) : options.getCheckpoint_every(); }
    /** Before initialize: steps between checkpoints (0: the library's default, $SHARDOPT_CHECKPOINT_EVERY or 100). */
    public ElasticOptimizer<T, TInput, TOutput> setCheckpointEvery(int steps) {
        beforeInitialize("setCheckpointEvery").setCheckpoint_every(steps);
        return this;
    }
    private shardopt_elastic_options beforeInitialize(String what) {
        if (isInitialized()) throw new IllegalStateException(what + " comes before initialize");
        return options;
    }
    private shardopt_elastic_status status() {
        shardopt_elastic_status st = new shardopt_elastic_status();
        shardopt_native.shardopt_optimizer_elastic_status(h(), st);
        return st;
    }
    private long status(ToLongFunction<shardopt_elastic_status> field) { return field.applyAsLong(status()); }
    /** The step count loaded at initialization; -1 when no checkpoint was there. */
    public long getResumedStep() { return status(shardopt_elastic_status::getResumed_step); }
    /** The latest complete checkpoint's step count (published, or loaded); -1 for none. */
    public long getLastCheckpointStep() { return status(shardopt_elastic_status::getLast_checkpoint_step); }
    public boolean isCheckpointPending() { return status(shardopt_elastic_status::getCheckpoint_pending) != 0; }
    /** Restarts of the job before this run ($SHARDOPT_ELASTIC_GENERATION; 0 without a launcher). */
    public int getGeneration() { return (int) status(shardopt_elastic_status::getGeneration); }
    public long getCheckpointsPublished() { return status(shardopt_elastic_status::getCheckpoints_published); }
    /** Collective: a checkpoint now, at a step boundary; IOException when its files could not be written. */
    public void checkpoint() throws IOException { shardopt_native.shardopt_optimizer_checkpoint_now(h()); }
    /** Collective: waits for the checkpoint being written and publishes it (at the end of training). */
    public void finishCheckpoint() throws IOException { shardopt_native.shardopt_optimizer_finish_checkpoint(h()); }
}
