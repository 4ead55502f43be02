import org.shardopt.*;
import org.shardopt.samples.MlpDemo;

/** Adam wrapped in FSDPOptimizer over an in-memory backend of world size 4 (one thread per rank) trains the demo MLP with
 *  optimize's lower-level form (a model over sample indices). */
public final class FsdpAdam {
    static final int WORLD_SIZE = 4;

    public static void main(String[] args) throws Exception {
        MlpDemo model = new MlpDemo(16, 32, 4, 1024);
        OptimizationResult[] results = new OptimizationResult[WORLD_SIZE];
        Thread[] ranks = new Thread[WORLD_SIZE];
        for (int r = 0; r < WORLD_SIZE; ++r) {
            final int rank = r;
            ranks[r] = new Thread(() -> {
                try (var backend = new InMemoryCommunicationBackend<Float>(rank, WORLD_SIZE, "fsdp-sample")) {
                    var options = new AdamOptimizerOptions<Float, Object, Object>();
                    options.setInitialLearningRate(3e-3);
                    options.setBatchSize(256);
                    options.setMaxIterations(6);
                    options.setUseEarlyStopping(false);
                    try (var fsdp = new FSDPOptimizer<>(new AdamOptimizer<>(options), new ShardingConfiguration<>(backend))) {
                        fsdp.initialize(model.layout(), model.initialParameters());
                        results[rank] = fsdp.optimize(model, new OptimizationInputData<>(model.samples));
                    }
                }
            });
            ranks[r].start();
        }
        for (Thread t : ranks) t.join();
        double[] h = results[0].getTrainingLossHistory();
        for (int e = 0; e < h.length; ++e) System.out.printf("epoch %d  loss %.4f%n", e + 1, h[e]);
        if (!(h[h.length - 1] < 0.9 * h[0])) {
            System.err.printf("loss did not decrease: %.4f -> %.4f%n", h[0], h[h.length - 1]);
            System.exit(1);
        }
        System.out.printf("FSDP over %d in-memory ranks, %d steps: loss %.4f -> %.4f%n", WORLD_SIZE, results[0].getSteps(), h[0], h[h.length - 1]);
    }
}
