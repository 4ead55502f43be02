package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.function.Function;
import java.util.function.Supplier;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.shardopt.*;

/** Issue 34: the GPU from Java. NCCLCommunicationBackend(rank, worldSize, deviceId) and StagedCommunicationBackend are the
 *  C ABI's shardopt_comm_create (they construct where a GPU is usable, else the library's UnsupportedOperationException:
 *  skipped); ShardingConfiguration's memory and CUDA stream reach the library for every strategy and the offload flags. */
class GpuTest {
    private static void constructsOrSkips(String backend, Supplier<CommunicationBackend<Float>> make) {
        CommunicationBackend<Float> b;
        try {
            b = make.get();
        } catch (UnsupportedOperationException e) {
            assertTrue(e.getMessage().startsWith("SHARDOPT_ERR_UNSUPPORTED") && e.getMessage().contains("'" + backend + "'"), e.getMessage());
            Assumptions.assumeTrue(false, "no usable GPU for " + backend + ": " + e.getMessage());
            return;
        }
        try (CommunicationBackend<Float> c = b) {
            assertEquals(0, c.getRank());
            assertEquals(1, c.getWorldSize());
            assertTrue(c.getDeviceId() >= 0);
        }
    }

    @Test
    void ncclConstructsOrSkips() { constructsOrSkips("nccl", () -> new NCCLCommunicationBackend<Float>(0, 1, -1)); }

    @Test
    void ncclFromTheEnvironmentConstructsOrSkips() { constructsOrSkips("nccl", NCCLCommunicationBackend::new); }

    @Test
    void ncclAliasConstructsOrSkips() { constructsOrSkips("nccl", NcclCommunicationBackend::new); }

    @Test
    void stagedConstructsOrSkips() { constructsOrSkips("staged", () -> new StagedCommunicationBackend<Float>(0, 1)); }

    @Test
    void argumentsAreTheLibrarysToCheck() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new NCCLCommunicationBackend<Float>(2, 2));
        assertTrue(e.getMessage().contains("rank 2 of worldSize 2"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new StagedCommunicationBackend<Float>(0, 1, -5));
        assertTrue(e.getMessage().contains("deviceId -5"), e.getMessage());
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-gpu-dev")) {
            assertEquals(-1, b.getDeviceId());
        }
    }

    @Test
    @SuppressWarnings({"unchecked", "rawtypes"})
    void cudaMemoryWithoutADeviceIsTheLibrarysError() {
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 1, "java-gpu-mem")) {
            ShardingConfiguration c = new ShardingConfiguration(b);
            assertEquals(MemorySpace.HOST, c.getMemory());
            assertEquals(0L, c.getCudaStream());
            c.setMemory(MemorySpace.CUDA);
            c.setCudaStream(0x1000L);
            assertEquals(MemorySpace.CUDA, c.getMemory());
            assertEquals(0x1000L, c.getCudaStream());
            // host memory where device memory is expected: refused, naming both
            try (ShardedOptimizer o = new DDPOptimizer(new AdamOptimizer(), c)) {
                java.nio.FloatBuffer mine = java.nio.ByteBuffer.allocateDirect(16).order(java.nio.ByteOrder.nativeOrder()).asFloatBuffer();
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> o.initialize(new ParameterLayout(ParameterLayout.Precision.FLOAT32).add("w", 4), null, mine));
                assertTrue(e.getMessage().contains("parameters is host memory")
                           && e.getMessage().contains("the optimizer's memory is CUDA device memory"), e.getMessage());
            }
            // every strategy and the ZeRO-Offload presets reach the library's creation, and its errors
            String noDevice = "backend 'inprocess' has no device";
            Function<ShardingConfiguration, ShardedOptimizer> ddp = cfg -> new DDPOptimizer(new AdamOptimizer(), cfg),
                zero1 = cfg -> new ZeRO1Optimizer(new AdamOptimizer(), cfg), zero2 = cfg -> new ZeRO2Optimizer(new AdamOptimizer(), cfg),
                fsdp = cfg -> new FSDPOptimizer(new AdamOptimizer(), cfg), local = cfg -> new LocalSGDOptimizer(new AdamOptimizer(), cfg),
                hybrid = cfg -> new HybridShardedOptimizer(new AdamOptimizer(), cfg);
            Supplier<ShardingConfiguration> plain = () -> new ShardingConfiguration(b),
                offload = () -> ShardingConfiguration.createForZeROOffload(b), full = () -> ShardingConfiguration.createForZeROOffloadFull(b);
            Object[][] cases = {
                {ddp, plain, noDevice}, {zero1, plain, noDevice}, {zero2, plain, noDevice}, {fsdp, plain, noDevice}, {local, plain, noDevice},
                {hybrid, plain, noDevice}, {ddp, offload, noDevice}, {zero2, offload, noDevice}, {fsdp, full, noDevice},
                {local, offload, "local_sgd averages its parameters"}, {ddp, full, "cpu_offload_params needs parameters sharded at rest"}};
            for (Object[] c1 : cases) {
                ShardingConfiguration cfg = ((Supplier<ShardingConfiguration>) c1[1]).get();
                cfg.setMemory(MemorySpace.CUDA);
                try (ShardedOptimizer o = ((Function<ShardingConfiguration, ShardedOptimizer>) c1[0]).apply(cfg)) {
                    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> o.initialize(new ParameterLayout(ParameterLayout.Precision.FLOAT32).add("w", 4), null));
                    assertTrue(e.getMessage().startsWith("SHARDOPT_ERR_INVALID_ARGUMENT") && e.getMessage().contains((String) c1[2]),
                               e.getMessage());
                }
            }
        }
    }
}
