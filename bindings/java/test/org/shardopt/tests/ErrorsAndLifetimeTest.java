package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.shardopt.*;
import org.junit.jupiter.api.Test;

class ErrorsAndLifetimeTest {
    @Test
    void invalidArgument() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> new InMemoryCommunicationBackend(5, 4, "java-bad-rank"));
        assertTrue(e.getMessage().startsWith("SHARDOPT_ERR_INVALID_ARGUMENT: "), e.getMessage());
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-inv");
             DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b),
                                               new ParameterLayout().add("w", 4), null)) {
            assertThrows(IllegalArgumentException.class, () -> o.setParameters(new float[3]));
            assertThrows(IllegalArgumentException.class, () -> o.setLearningRate(-1));
            assertThrows(IllegalArgumentException.class, () -> o.getTensorSize(9));
            assertThrows(NullPointerException.class, () -> o.setParameters((float[]) null));
        }
    }

    @Test
    void invalidStateAndTimeout() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-state");
             FSDPOptimizer o = new FSDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b),
                                                 new ParameterLayout().add("w", 4), null)) {
            IllegalStateException e = assertThrows(IllegalStateException.class, o::getParameters);
            assertTrue(e.getMessage().contains("SHARDOPT_ERR_INVALID_STATE"), e.getMessage());
        }
        IllegalStateException t = assertThrows(IllegalStateException.class, () -> Ranks.run(2, b -> {
            b.setTimeout(200);
            if (b.getRank() == 0) b.barrier();
            else try { Thread.sleep(2000); } catch (InterruptedException x) {} // absent but alive (a rank that closed would fail the barrier at once: PEER_LOST)
            return null;
        }));
        assertTrue(t.getMessage().contains("SHARDOPT_ERR_TIMEOUT"), t.getMessage());
    }

    @Test
    void unsupported() {
        // NCCLCommunicationBackend constructs or skips: GpuTest
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-unsup");
             FSDPOptimizer o = new FSDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b))) {
            java.nio.FloatBuffer mine = java.nio.ByteBuffer.allocateDirect(16).order(java.nio.ByteOrder.nativeOrder()).asFloatBuffer();
            assertThrows(UnsupportedOperationException.class, () -> o.initialize(new ParameterLayout().add("w", 4), null, mine));
            o.initialize(new ParameterLayout().add("w", 4), null);
        }
    }

    @Test
    void ioAndCorruptAreIOExceptions() throws IOException {
        java.nio.file.Path dir = Files.createTempDirectory("shardopt-java-ckpt");
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-ckpt-errors");
             FSDPOptimizer o = new FSDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b),
                                                 new ParameterLayout().add("w", 4), null)) {
            IOException io = assertThrows(IOException.class, () -> o.loadModel(dir.resolve("missing").toString()));
            assertTrue(io.getMessage().startsWith("SHARDOPT_ERR_IO: "), io.getMessage());
            IOException c = assertThrows(IOException.class, () -> o.deserialize("not a checkpoint".getBytes()));
            assertTrue(c.getMessage().startsWith("SHARDOPT_ERR_CORRUPT: "), c.getMessage());
            java.nio.file.Path blocker = Files.writeString(dir.resolve("file"), "x");
            assertThrows(IOException.class, () -> o.saveModel(blocker.resolve("sub").toString()));
        } finally {
            Files.deleteIfExists(dir.resolve("file"));
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void nullArguments() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-null")) {
            ShardingConfiguration c = new ShardingConfiguration(b);
            assertThrows(NullPointerException.class, () -> new DDPOptimizer(null, c));
            assertThrows(NullPointerException.class, () -> new ZeRO1Optimizer(new AdamOptimizer(), null));
            assertThrows(NullPointerException.class, () -> new ZeRO2Optimizer(null, c));
            assertThrows(NullPointerException.class, () -> new FSDPOptimizer(null, c));
            assertThrows(NullPointerException.class, () -> new ZeRO3Optimizer(null, c));
            assertThrows(NullPointerException.class, () -> new HybridShardedOptimizer(null, c, 1, 1, -1));
            assertThrows(NullPointerException.class, () -> new LocalSGDOptimizer(null, c));
            assertThrows(NullPointerException.class, () -> new ShardingConfiguration(null));
        }
    }

    @Test
    void modelExceptionPropagates() {
        class Boom extends RuntimeException { Boom() { super("model failed on rank 1"); } }
        Boom e = assertThrows(Boom.class, () -> Ranks.run(2, b -> {
            try (DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b),
                                                   new ParameterLayout().add("w", 4), null)) {
                o.optimize((p, g, s, d) -> { if (b.getRank() == 1) throw new Boom(); return 1.0; }, new OptimizationInputData(8));
            }
            return null;
        }));
        assertEquals("model failed on rank 1", e.getMessage());
    }

    static long rssKib() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status")))
            if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
        return 0;
    }

    @Test
    void tenThousandCreateDisposeCycles() throws IOException {
        ParameterLayout lay = new ParameterLayout().add("w", 256).add("b", 16);
        Runnable cycle = () -> {
            try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-cycles");
                 ZeRO2Optimizer o = new ZeRO2Optimizer(new AdamOptimizer(), new ShardingConfiguration(b), lay, null)) {
                o.zeroGrad();
                o.step();
            }
        };
        for (int i = 0; i < 2000; ++i) cycle.run();
        System.gc();
        System.runFinalization();
        long before = rssKib();
        for (int i = 0; i < 10000; ++i) cycle.run();
        System.gc();
        System.runFinalization();
        long grown = rssKib() - before;
        assertTrue(grown < 16384, "RSS grew by " + grown + " KiB over 10000 cycles");
    }
}
