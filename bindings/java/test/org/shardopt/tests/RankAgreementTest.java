package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.shardopt.*;

/** Issue 19, part 3: ranks that disagree fail on every rank, naming the difference. */
class RankAgreementTest {
    static void allFail(Throwable[] errs, Class<? extends Throwable> type, String... parts) {
        for (int r = 0; r < errs.length; ++r) {
            assertNotNull(errs[r], "rank " + r + " did not fail");
            assertTrue(type.isInstance(errs[r]), "rank " + r + ": " + errs[r]);
            SafetyTest.contains(errs[r], parts);
        }
    }

    @Test
    void differentLayoutsFailOnEveryRank() {
        Throwable[] errs = Ranks.runAll(3, b -> {
            ParameterLayout l = new ParameterLayout().add("w1", 6).add(b.getRank() == 2 ? "w2" : "w", 2); // same padded size
            new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), l, null).close();
        });
        allFail(errs, IllegalStateException.class, "SHARDOPT_ERR_MISMATCH", "ranks disagree on the parameter layout at tensor 1",
                "its name");
        Throwable[] dtype = Ranks.runAll(2, b -> {
            ParameterLayout l = new ParameterLayout(b.getRank() == 1 ? ParameterLayout.Precision.FLOAT64 : ParameterLayout.Precision.FLOAT32)
                .add("w", 4);
            new FSDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), l, null).close();
        });
        allFail(dtype, IllegalStateException.class, "SHARDOPT_ERR_MISMATCH", "ranks disagree");
    }

    @Test
    void differentOptionsFailOnEveryRank() {
        Throwable[] errs = Ranks.runAll(2, b -> {
            ShardingConfiguration c = new ShardingConfiguration(b);
            c.setGradientAccumulationSteps(b.getRank() + 1);
            new ZeRO2Optimizer(new AdamOptimizer(), c, new ParameterLayout().add("w", 4), null).close();
        });
        allFail(errs, IllegalStateException.class, "SHARDOPT_ERR_MISMATCH", "ranks disagree on gradient_accumulation_steps");
        Throwable[] lr = Ranks.runAll(2, b -> {
            new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b, b.getRank() == 0 ? 0.1 : 0.2),
                             new ParameterLayout().add("w", 4), null).close();
        });
        allFail(lr, IllegalStateException.class, "SHARDOPT_ERR_MISMATCH", "ranks disagree on");
    }

    @Test
    void initialParametersAreRankZerosUnlessKeptLocal() {
        for (boolean broadcast : new boolean[] {true, false}) {
            List<float[]> res = Ranks.run(3, b -> {
                ShardingConfiguration c = new ShardingConfiguration(b);
                assertTrue(c.getBroadcastInitialParameters());
                c.setBroadcastInitialParameters(broadcast);
                float[] mine = {b.getRank() + 1, 10 * (b.getRank() + 1)};
                try (DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), c, new ParameterLayout().add("w", 2), mine)) {
                    return o.getParametersFloat();
                }
            });
            for (int r = 0; r < 3; ++r)
                assertArrayEquals(broadcast ? new float[] {1, 10} : new float[] {r + 1, 10 * (r + 1)}, res.get(r), "broadcast " + broadcast);
        }
    }

    @Test
    void inMemoryWorldSizeDisagreementFailsAtOnce() {
        String id = "java-ws-" + System.nanoTime();
        try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(0, 2, id)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new InMemoryCommunicationBackend(1, 3, id));
            SafetyTest.contains(e, "SHARDOPT_ERR_INVALID_ARGUMENT");
            new InMemoryCommunicationBackend(1, 2, id).close();
        }
    }

    @Test
    void modelExceptionOnOneRankFailsEveryRankNamingIt() {
        class BadBatch extends RuntimeException { BadBatch() { super("row 7 has 3 features, expected 8"); } }
        Throwable[] errs = Ranks.runAll(3, b -> {
            try (DDPOptimizer o = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b), new ParameterLayout().add("w", 4), null)) {
                o.optimize((p, g, s, d) -> { if (b.getRank() == 1) throw new BadBatch(); return 1.0; }, new OptimizationInputData(12));
            }
        });
        assertTrue(errs[1] instanceof BadBatch, String.valueOf(errs[1])); // the throwing rank gets its own exception back
        for (int r : new int[] {0, 2}) {
            assertTrue(errs[r] instanceof IllegalStateException, String.valueOf(errs[r]));
            SafetyTest.contains(errs[r], "SHARDOPT_ERR_INVALID_STATE", "on rank 1", "BadBatch", "row 7 has 3 features, expected 8");
        }
    }

    @Test
    void ucxWithoutLauncherEnvironmentRaises() {
        Assumptions.assumeTrue(System.getenv("SHARDOPT_WORLD_SIZE") == null && System.getenv("OMPI_COMM_WORLD_SIZE") == null
                               && System.getenv("WORLD_SIZE") == null && System.getenv("PMI_SIZE") == null
                               && System.getenv("SLURM_NTASKS") == null);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new UcxCommunicationBackend());
        SafetyTest.contains(e, "SHARDOPT_ERR_INVALID_ARGUMENT", "found no world size in the environment", "SHARDOPT_WORLD_SIZE=1");
    }

    /** A separate JVM, since asking for a single-process world sets SHARDOPT_WORLD_SIZE in the process. */
    @Test
    void ucxSingleProcessWorldWhenAskedExplicitly() throws Exception {
        String cp = System.getenv("SHARDOPT_JAVA_CP"), java = System.getenv("JAVA");
        Assumptions.assumeTrue(cp != null && java != null);
        Process p = new ProcessBuilder(java, "-cp", cp, "org.shardopt.tests.UcxSingleWorker").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("single ok rank 0 of 1"), out);
    }

    /** Two UCX processes launched as worlds of 2 and 3: rendezvous fails on both naming both values. */
    @Test
    void ucxWorldSizeDisagreementFailsAtRendezvous() throws Exception {
        String run = System.getenv("SHARDOPT_RUN"), cp = System.getenv("SHARDOPT_JAVA_CP"), java = System.getenv("JAVA");
        Assumptions.assumeTrue(run != null && cp != null && java != null);
        Process p = new ProcessBuilder("python3", run, "-n", "2", "--timeout", "60", "--", "bash", "-c",
            "if [ \"$SHARDOPT_RANK\" = 1 ]; then export SHARDOPT_WORLD_SIZE=3; fi; exec \"$0\" -cp \"$1\" org.shardopt.tests.UcxWorldSizeWorker",
            java, cp).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(90, TimeUnit.SECONDS));
        assertEquals(2, out.split("rendezvous failed:", -1).length - 1, out);
        assertTrue(out.contains("world size disagrees across ranks"), out);
        assertTrue(out.contains("has world size 3") && out.contains("has 2") || out.contains("has world size 2") && out.contains("has 3"), out);
    }
}
