package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import org.shardopt.*;
import org.shardopt.samples.MlpDemo;
import org.junit.jupiter.api.Test;

/** AsyncSGDOptimizer on 4 in-memory ranks: staleness 0 is DDP bit for bit; at staleness 2 every rank ends
 *  with the same parameters and training converges; misuse raises. */
class AsyncSgdTest {
    static final MlpDemo MODEL = new MlpDemo();

    static List<Object[]> train(int staleness, boolean async) {
        return Ranks.run(4, b -> {
            AdamOptimizerOptions o = new AdamOptimizerOptions();
            o.setLearningRate(3e-3);
            o.setBatchSize(64);
            o.setMaxIterations(3);
            AdamOptimizer adam = new AdamOptimizer(o);
            ShardingConfiguration cfg = new ShardingConfiguration(b);
            ShardedOptimizer opt = async ? new AsyncSGDOptimizer(adam, cfg, staleness) : new DDPOptimizer(adam, cfg);
            try (ShardedOptimizer s = opt) {
                s.initialize(MODEL.layout(), MODEL.initialParameters());
                OptimizationResult r = s.optimize(MODEL, new OptimizationInputData(MODEL.samples));
                return new Object[] {r, s.getParametersFloat(), s.getStepCount()};
            }
        });
    }

    @Test
    void staleness0IsDdpBitForBit() {
        List<Object[]> ddp = train(0, false), async = train(0, true);
        float[] ref = (float[]) ddp.get(0)[1];
        for (int r = 0; r < 4; ++r) {
            assertArrayEquals(ref, (float[]) async.get(r)[1], "rank " + r);
            assertArrayEquals(((OptimizationResult) ddp.get(0)[0]).getFitnessHistory(),
                              ((OptimizationResult) async.get(r)[0]).getFitnessHistory());
        }
    }

    @Test
    void staleness2TrainsAndRanksAgree() {
        List<Object[]> async = train(2, true);
        OptimizationResult r0 = (OptimizationResult) async.get(0)[0];
        double[] h = r0.getFitnessHistory();
        assertTrue(h[2] < 0.8 * h[0], "the loss fell: " + h[0] + " -> " + h[2]);
        assertEquals(3L * MODEL.samples / 64, (long) async.get(0)[2]); // one update per clock
        for (int r = 1; r < 4; ++r) assertArrayEquals((float[]) async.get(0)[1], (float[]) async.get(r)[1]);
    }

    @Test
    void misuseRaises() {
        assertThrows(IllegalArgumentException.class, () -> Ranks.run(1, b ->
            new AsyncSGDOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), -1)));
        Ranks.run(2, b -> {
            try (AsyncSGDOptimizer opt = new AsyncSGDOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), 3)) {
                assertEquals(3, opt.getAllowStaleness());
                opt.initialize(MODEL.layout(), MODEL.initialParameters());
                UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class, opt::step);
                assertTrue(e.getMessage().contains("optimize()"), e.getMessage());
            }
            return null;
        });
    }
}
