package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import org.shardopt.*;
import org.shardopt.samples.MlpDemo;
import org.junit.jupiter.api.Test;

/** ZeRO-Offload's configuration with AiDotNet's names (CpuOffloadOptimizer, CpuOffloadGradients,
 *  CpuOffloadParams; createForZeROOffload, createForZeROOffloadFull). These optimizers keep their memory in
 *  host memory, where the flags are accepted and change nothing: training is bit for bit the same, and the
 *  memory stats are too, with no host bytes beside the usual ones. */
class OffloadTest {
    static final MlpDemo MODEL = new MlpDemo();

    static boolean[] flags(ShardingConfiguration<?> c) {
        return new boolean[] {c.getCpuOffloadOptimizer(), c.getCpuOffloadGradients(), c.getCpuOffloadParams()};
    }

    @Test
    void factoriesSetAiDotNetsFlags() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "offload-factories")) {
            assertArrayEquals(new boolean[] {false, false, false}, flags(new ShardingConfiguration<>(b)));
            assertArrayEquals(new boolean[] {true, false, false}, flags(ShardingConfiguration.createForZeROOffload(b)));
            assertArrayEquals(new boolean[] {true, true, true}, flags(ShardingConfiguration.createForZeROOffloadFull(b)));
            ShardingConfiguration<?> c = new ShardingConfiguration<>(b);
            c.setCpuOffloadParams(true);
            assertTrue(c.getCpuOffloadParams());
        }
        assertThrows(NullPointerException.class, () -> ShardingConfiguration.createForZeROOffload(null));
        assertThrows(NullPointerException.class, () -> ShardingConfiguration.createForZeROOffloadFull(null));
    }

    @Test
    void flagsChangeNothingInHostMemory() {
        for (String strategy : new String[] {"ddp", "zero2", "fsdp"}) {
            List<Object[]> res = Ranks.run(2, b -> {
                Object[] out = new Object[4];
                ShardingConfiguration<?>[] configs = {new ShardingConfiguration<>(b), ShardingConfiguration.createForZeROOffloadFull(b)};
                for (int k = 0; k < 2; ++k) {
                    AdamOptimizerOptions o = new AdamOptimizerOptions();
                    o.setLearningRate(3e-3);
                    o.setBatchSize(128);
                    o.setMaxIterations(2);
                    AdamOptimizer adam = new AdamOptimizer(o);
                    ShardedOptimizer opt = strategy.equals("ddp") ? new DDPOptimizer(adam, configs[k])
                        : strategy.equals("zero2") ? new ZeRO2Optimizer(adam, configs[k]) : new FSDPOptimizer(adam, configs[k]);
                    try (ShardedOptimizer s = opt) {
                        s.initialize(MODEL.layout(), MODEL.initialParameters());
                        s.optimize(MODEL, new OptimizationInputData(MODEL.samples));
                        out[2 * k] = s.getParametersFloat();
                        out[2 * k + 1] = s.getMemoryStats();
                    }
                }
                return out;
            });
            for (Object[] r : res) {
                assertArrayEquals((float[]) r[0], (float[]) r[2], 0f, strategy);
                MemoryStats plain = (MemoryStats) r[1], full = (MemoryStats) r[3];
                assertEquals(plain.paramsBytes, full.paramsBytes, strategy);
                assertEquals(plain.gradsBytes, full.gradsBytes, strategy);
                assertEquals(plain.optimizerStateBytes, full.optimizerStateBytes, strategy);
                assertEquals(plain.bufferBytes, full.bufferBytes, strategy);
                assertEquals(plain.totalBytes, full.totalBytes, strategy);
                assertTrue(full.optimizerStateBytes > 0, strategy);
                assertEquals(0, full.hostParamsBytes + full.hostGradsBytes + full.hostOptimizerStateBytes + full.hostTotalBytes,
                             strategy);
            }
        }
    }
}
