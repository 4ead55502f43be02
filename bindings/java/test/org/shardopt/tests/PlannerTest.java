package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.shardopt.*;

/** The planner from Java: the strategies that fit first, fastest first; rankMemory equals getMemoryStats(); bad input is
 *  the library's IllegalArgumentException naming it. */
class PlannerTest {
    @Test
    void sevenBillionOnEightGpus() {
        Planner.Cluster c = new Planner.Cluster();
        c.ranksPerHost = 8;
        c.gpus = true;
        c.deviceMemoryBytes = 80_000_000_000L;
        c.intraBandwidth = 900e9;
        List<Planner.Plan> plans = Planner.plan(7e9, null, c, 2.0);
        int fitting = 0;
        while (fitting < plans.size() && plans.get(fitting).fits) ++fitting;
        assertTrue(fitting > 0 && fitting < plans.size());
        for (int i = fitting; i < plans.size(); ++i) assertFalse(plans.get(i).fits);
        for (int i = 1; i < fitting; ++i) assertTrue(plans.get(i).stepSeconds >= plans.get(i - 1).stepSeconds);
        Planner.Plan ddp = plans.stream().filter(p -> p.name.equals("ddp")).findFirst().get();
        assertFalse(ddp.fits);
        assertEquals(112_000_000_000L, ddp.deviceBytes);
        assertTrue(plans.stream().anyMatch(p -> p.name.equals("fsdp") && p.fits && p.optimizerStateBytes == 7_000_000_000L));
    }

    @Test
    void rankMemoryIsMemoryStats() {
        ParameterLayout layout = new ParameterLayout().addMatrix("w", 40, 30).add("b", 7);
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-planner");
             ZeRO2Optimizer<Float, float[], float[]> o =
                 new ZeRO2Optimizer<>(new AdamOptimizer<>(), new ShardingConfiguration<>(b), layout, new float[40 * 30 + 7])) {
            o.zeroGrad();
            o.step();
            MemoryStats measured = o.getMemoryStats(), planned = Planner.rankMemory(layout, "zero2", 1, 0);
            assertEquals(measured.totalBytes, planned.totalBytes);
            assertEquals(measured.optimizerStateBytes, planned.optimizerStateBytes);
            assertEquals(measured.peakBufferBytes, planned.peakBufferBytes);
            assertTrue(planned.optimizerStateBytes > 0);
        }
    }

    @Test
    void badInputIsNamed() {
        Planner.Cluster c = new Planner.Cluster();
        c.ranksPerHost = 8;
        c.gpus = true;
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Planner.plan(7e9, null, c, 1.0));
        assertTrue(e.getMessage().contains("device_memory_bytes"), e.getMessage());
        c.deviceMemoryBytes = 80_000_000_000L;
        e = assertThrows(IllegalArgumentException.class, () -> Planner.plan(0, null, c, 1.0));
        assertTrue(e.getMessage().contains("parameter count"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Planner.rankMemory(new ParameterLayout().add("w", 4), "zero9", 1, 0));
    }
}
