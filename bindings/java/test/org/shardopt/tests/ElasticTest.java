package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;
import org.shardopt.*;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** ElasticOptimizer on in-process ranks: a 4-rank job checkpointing every 2 steps is resumed by 3 ranks and
 *  ends equal, bit for bit, to a DDP optimizer saved at the same step and loaded by 3 ranks; argument and
 *  world-size errors. */
class ElasticTest {
    @TempDir Path tmp;

    interface IoBody<T> { T apply(CommunicationBackend b) throws IOException; }

    static <T> List<T> ranks(int worldSize, IoBody<T> body) {
        return Ranks.run(worldSize, b -> {
            try { return body.apply(b); } catch (IOException e) { throw new UncheckedIOException(e); }
        });
    }

    static AdamOptimizer adam() {
        AdamOptimizerOptions o = new AdamOptimizerOptions();
        o.setLearningRate(3e-3);
        return new AdamOptimizer(o);
    }

    ElasticOptimizer<Float, Object, Object> elastic(CommunicationBackend b) {
        ElasticOptimizer<Float, Object, Object> e = new ElasticOptimizer<>(adam(), new ShardingConfiguration<>(b), 2, 4);
        e.setCheckpointDirectory(tmp.resolve("elastic").toString()).setCheckpointEvery(2);
        e.initialize(CheckpointTest.MODEL.layout(), CheckpointTest.MODEL.initialParameters());
        return e;
    }

    @Test
    void resumesAtAnotherWorldSize() {
        String reference = tmp.resolve("reference").toString();
        ranks(4, b -> {
            try (ElasticOptimizer<Float, Object, Object> e = elastic(b);
                 ShardedOptimizer twin = CheckpointTest.make("ddp", b, true)) {
                assertEquals(-1, e.getResumedStep());
                assertEquals(-1, e.getLastCheckpointStep());
                assertEquals(0, e.getGeneration());
                assertEquals(2, e.getCheckpointEvery());
                assertEquals(tmp.resolve("elastic").toString(), e.getCheckpointDirectory());
                CheckpointTest.train(e, b.getRank(), 0, 6);
                CheckpointTest.train(twin, b.getRank(), 0, 6);
                twin.saveModel(reference);
                e.finishCheckpoint();
                assertEquals(6, e.getLastCheckpointStep());
                assertEquals(3, e.getCheckpointsPublished());
                assertFalse(e.isCheckpointPending());
                return null;
            }
        });
        List<float[][]> res = ranks(3, b -> {
            try (ElasticOptimizer<Float, Object, Object> e = elastic(b);
                 ShardedOptimizer ref = CheckpointTest.make("ddp", b, false)) {
                assertEquals(6, e.getResumedStep());
                assertEquals(6, e.getStepCount());
                ref.loadModel(reference);
                CheckpointTest.train(e, b.getRank(), 6, 4);
                CheckpointTest.train(ref, b.getRank(), 6, 4);
                e.checkpoint();
                e.finishCheckpoint();
                assertEquals(10, e.getLastCheckpointStep());
                return new float[][] {e.getParametersFloat(), ref.getParametersFloat()};
            }
        });
        for (float[][] r : res) assertArrayEquals(r[1], r[0]);
    }

    @Test
    void errors() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1)) {
            ShardingConfiguration<Float> cfg = new ShardingConfiguration<>(b);
            assertTrue(assertThrows(IllegalArgumentException.class, () -> new ElasticOptimizer<>(adam(), cfg, 3, 2))
                    .getMessage().contains("maxWorkers 2 is below minWorkers 3"));
            assertThrows(IllegalArgumentException.class, () -> new ElasticOptimizer<>(adam(), cfg, 0, 2));
            ElasticOptimizer<Float, Object, Object> e = new ElasticOptimizer<>(adam(), cfg, 2, 4);
            assertThrows(IllegalArgumentException.class, () -> e.setCheckpointEvery(-1));
            e.setCheckpointDirectory(tmp.toString());
            IllegalStateException outside = assertThrows(IllegalStateException.class,
                    () -> e.initialize(CheckpointTest.MODEL.layout(), null));
            assertTrue(outside.getMessage().contains("the world has 1 ranks, outside [minWorkers 2, maxWorkers 4]"),
                       outside.getMessage());
            assertFalse(e.isInitialized());
            assertThrows(IllegalStateException.class, e::getResumedStep);
            try (ElasticOptimizer<Float, Object, Object> one = new ElasticOptimizer<>(adam(), cfg)) {
                one.setCheckpointDirectory(tmp.toString()).setCheckpointEvery(3);
                one.initialize(CheckpointTest.MODEL.layout(), null);
                assertEquals(3, one.getCheckpointEvery());
                assertThrows(IllegalStateException.class, () -> one.setCheckpointEvery(4));
            }
        }
    }
}
