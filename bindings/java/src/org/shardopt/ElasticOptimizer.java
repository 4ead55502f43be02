package org.shardopt;

import java.io.IOException;
import org.shardopt.internal.SWIGTYPE_p_shardopt_optimizer_s;
import org.shardopt.internal.shardopt_elastic_status;
import org.shardopt.internal.shardopt_native;

/**
 * AiDotNet's ElasticOptimizer(wrapped, config, minWorkers = 1, maxWorkers = 1024), for real (docs/elastic.md):
 * data parallel (DDP) training that checkpoints every {@link #getCheckpointEvery} steps without stopping (the state
 * copied at the step boundary, written by background threads) into {@link #getCheckpointDirectory} (a directory
 * every rank shares), and, when it is initialized, resumes from the latest complete checkpoint there at whatever
 * world size the job now has, from minWorkers to maxWorkers. {@code shardopt-run --elastic --min N --max M
 * --checkpoint-dir D} restarts the ranks with the survivors when one dies or a host is cut off; each rank builds
 * its ElasticOptimizer as before and goes on from {@link #getStepCount}. optimize() after a resume skips the
 * iterations the checkpoint covers. Initialization throws IllegalStateException when the world size is outside
 * [minWorkers, maxWorkers], and java.io.IOException when the checkpoint there does not load.
 */
public class ElasticOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final int minWorkers, maxWorkers;
    private String checkpointDirectory; // null: $SHARDOPT_CHECKPOINT_DIR
    private int checkpointEvery;        // 0: $SHARDOPT_CHECKPOINT_EVERY, else 100

    public ElasticOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        this(wrappedOptimizer, config, 1, 1024);
    }

    /** @throws IllegalArgumentException when minWorkers < 1 or maxWorkers < minWorkers */
    public ElasticOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int minWorkers,
                            int maxWorkers) {
        super(wrappedOptimizer, config, DDP, checkWorkers(minWorkers, maxWorkers));
        this.minWorkers = minWorkers;
        this.maxWorkers = maxWorkers;
    }

    private static double checkWorkers(int minWorkers, int maxWorkers) {
        if (minWorkers < 1) throw new IllegalArgumentException("minWorkers must be at least 1 (got " + minWorkers + ")");
        if (maxWorkers < minWorkers)
            throw new IllegalArgumentException("maxWorkers " + maxWorkers + " is below minWorkers " + minWorkers);
        return 0.0;
    }

    @Override
    void created(SWIGTYPE_p_shardopt_optimizer_s x) {
        shardopt_native.so_make_elastic(x, minWorkers, maxWorkers, checkpointEvery,
                                        checkpointDirectory == null ? "" : checkpointDirectory);
    }

    public int getMinWorkers() { return minWorkers; }
    public int getMaxWorkers() { return maxWorkers; }

    /** The directory in force once initialized; before, the one set (null: $SHARDOPT_CHECKPOINT_DIR). */
    public String getCheckpointDirectory() {
        return isInitialized() ? shardopt_native.so_elastic_dir(h()) : checkpointDirectory;
    }

    /** Before initialize: where checkpoints go (a directory every rank shares); null for $SHARDOPT_CHECKPOINT_DIR. */
    public ElasticOptimizer<T, TInput, TOutput> setCheckpointDirectory(String dir) {
        if (isInitialized()) throw new IllegalStateException("setCheckpointDirectory comes before initialize");
        checkpointDirectory = dir;
        return this;
    }

    public int getCheckpointEvery() {
        if (!isInitialized()) return checkpointEvery;
        shardopt_elastic_status st = status();
        try { return st.getCheckpoint_every(); } finally { st.delete(); }
    }

    /** Before initialize: steps between checkpoints; 0 for $SHARDOPT_CHECKPOINT_EVERY, else 100. */
    public ElasticOptimizer<T, TInput, TOutput> setCheckpointEvery(int steps) {
        if (isInitialized()) throw new IllegalStateException("setCheckpointEvery comes before initialize");
        if (steps < 0) throw new IllegalArgumentException("checkpointEvery must be >= 0 (got " + steps + ")");
        checkpointEvery = steps;
        return this;
    }

    private shardopt_elastic_status status() {
        shardopt_elastic_status st = new shardopt_elastic_status();
        shardopt_native.so_elastic_status(h(), st);
        return st;
    }

    /** The step count loaded at initialization; -1 when no checkpoint was there. */
    public long getResumedStep() { shardopt_elastic_status st = status(); try { return st.getResumed_step(); } finally { st.delete(); } }
    /** The latest complete checkpoint's step count (published, or loaded); -1 for none. */
    public long getLastCheckpointStep() { shardopt_elastic_status st = status(); try { return st.getLast_checkpoint_step(); } finally { st.delete(); } }
    public boolean isCheckpointPending() { shardopt_elastic_status st = status(); try { return st.getCheckpoint_pending() != 0; } finally { st.delete(); } }
    /** Restarts of the job before this run ($SHARDOPT_ELASTIC_GENERATION; 0 without a launcher). */
    public int getGeneration() { shardopt_elastic_status st = status(); try { return st.getGeneration(); } finally { st.delete(); } }
    public long getCheckpointsPublished() { shardopt_elastic_status st = status(); try { return st.getCheckpoints_published(); } finally { st.delete(); } }

    /** Collective: a checkpoint now, at a step boundary (the previous one finished first); IOException when a
     *  checkpoint's files could not be written. */
    public void checkpoint() throws IOException { shardopt_native.so_checkpoint_now(m()); }
    /** Collective: waits for the checkpoint being written and publishes it (call it at the end of training);
     *  IOException when its files could not be written (the previous checkpoint stays the latest). */
    public void finishCheckpoint() throws IOException { shardopt_native.so_finish_checkpoint(m()); }
}
