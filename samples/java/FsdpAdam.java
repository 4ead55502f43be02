import org.shardopt.*;

/** The seed example: an Adam optimizer wrapped in FSDPOptimizer, with a ShardingConfiguration over an
 * in-memory backend of world size 4 (one thread per rank), trains the demo MLP with optimize(). */
public final class FsdpAdam {
    static final int WORLD_SIZE = 4;

    public static void main(String[] args) throws Exception {
        MlpDemo model = new MlpDemo(16, 32, 4, 1024);
        OptimizationResult[] results = new OptimizationResult[WORLD_SIZE];
        Thread[] ranks = new Thread[WORLD_SIZE];
        for (int r = 0; r < WORLD_SIZE; ++r) {
            final int rank = r;
            ranks[r] = new Thread(() -> {
                try (InMemoryCommunicationBackend backend = new InMemoryCommunicationBackend(rank, WORLD_SIZE, "fsdp-sample")) {
                    ShardingConfiguration config = new ShardingConfiguration(backend);
                    AdamOptimizerOptions options = new AdamOptimizerOptions();
                    options.setLearningRate(3e-3);
                    try (FSDPOptimizer fsdp = new FSDPOptimizer(new AdamOptimizer(options), config)) {
                        fsdp.initialize(model.layout(), model.initialParameters());
                        results[rank] = fsdp.optimize(model, new OptimizationInputData(model.samples, 256, 6));
                    }
                }
            });
            ranks[r].start();
        }
        for (Thread t : ranks) t.join();
        double[] h = results[0].getFitnessHistory();
        for (int e = 0; e < h.length; ++e) System.out.printf("epoch %d  loss %.4f%n", e + 1, h[e]);
        if (!(h[h.length - 1] < 0.9 * h[0])) {
            System.err.printf("loss did not decrease: %.4f -> %.4f%n", h[0], h[h.length - 1]);
            System.exit(1);
        }
        System.out.printf("FSDP over %d in-memory ranks, %d steps: loss %.4f -> %.4f%n", WORLD_SIZE,
                          results[0].getIterations(), h[0], h[h.length - 1]);
    }
}
