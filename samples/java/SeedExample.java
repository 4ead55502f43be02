import org.shardopt.*; // AiDotNet: using AiDotNet.DistributedTraining; (+ AiDotNet.Optimizers)

/**
 * The example of AiDotNet's FSDPOptimizer page, ported with only the import line and the model changed (LinearModel, the
 * conformance suite's model, and its training set); the generic types are Java's (Double for double). It runs the page's
 * four in-memory ranks on threads, FSDP over Adam with default options, and prints rank 0's result in the conformance
 * suite's output format as run seed_example (ctest samples.java_seed_example compares it with the C driver's).
 */
public final class SeedExample {
    static String train(int rank) {
        var model = new LinearModel();
        var options = new AdamOptimizerOptions<Double, Tensor<Double>, Tensor<Double>>();
        var inputData = new OptimizationInputData<Double, Tensor<Double>, Tensor<Double>>();
        inputData.XTrain = LinearModel.features(0, 64);
        inputData.YTrain = LinearModel.targets(0, 64);

        // ---- AiDotNet's example, ported ----
        // Original optimizer
        var optimizer = new AdamOptimizer<Double, Tensor<Double>, Tensor<Double>>(model, options);

        // Wrap it for FSDP distributed training
        var backend = new InMemoryCommunicationBackend<Double>(rank, 4);
        var config = new ShardingConfiguration<Double>(backend);
        var fsdpOptimizer = new FSDPOptimizer<Double, Tensor<Double>, Tensor<Double>>(optimizer, config);

        // Now optimize as usual - FSDP magic happens automatically!
        var result = fsdpOptimizer.optimize(inputData);
        // ---- end of the example ----

        String out = "run seed_example\n" + hex("params", fsdpOptimizer.getParametersDouble()) + hex("best", (double[]) result.getBestSolution())
            + hex("training", result.getTrainingLossHistory()) + hex("validation", result.getValidationLossHistory())
            + hex("lr", result.getLearningRateHistory())
            + String.format("counts %d %d %d %d%n", result.getIterations(), result.getSteps(), result.getBestEpoch(), result.getStoppedEarly() ? 1 : 0)
            + hex("losses", result.getBestFitnessScore(), result.getTrainingResult().getLoss(), loss(result.getValidationResult()),
                  loss(result.getTestResult()));
        fsdpOptimizer.close();
        backend.close();
        return out;
    }

    static double loss(OptimizationResult.DatasetResult set) { return set == null ? Double.NaN : set.getLoss(); } // NaN: not given

    static String hex(String word, double... values) {
        StringBuilder s = new StringBuilder(word);
        for (double v : values) s.append(String.format(" %016x", Double.doubleToRawLongBits(v)));
        return s.append('\n').toString();
    }

    public static void main(String[] args) throws Exception {
        String[] out = new String[4];
        Throwable[] error = new Throwable[1];
        Thread[] ranks = new Thread[4];
        for (int r = 0; r < 4; ++r) {
            final int rank = r;
            ranks[r] = new Thread(() -> {
                try {
                    out[rank] = train(rank);
                } catch (Throwable t) {
                    synchronized (error) { if (error[0] == null) error[0] = t; }
                }
            });
            ranks[r].start();
        }
        for (Thread t : ranks) t.join();
        if (error[0] != null) throw new RuntimeException(error[0]);
        for (String o : out) if (!o.equals(out[0])) throw new AssertionError("the ranks' results differ");
        System.out.print(out[0]);
    }
}
