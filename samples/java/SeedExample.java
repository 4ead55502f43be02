import org.shardopt.*; // AiDotNet: using AiDotNet.DistributedTraining; (+ AiDotNet.Optimizers)

/**
 * The example of AiDotNet's FSDPOptimizer page, ported: only the import line and the model class
 * (LinearModel) changed; the generic types are Java's (Double for double, double[][] / double[] for the
 * model's input and output). Runs on 4 in-memory ranks (threads; default) or as one UCX process
 * ("ucx", under tools/shardopt-run -n 4), then checks that the result equals single-process training.
 * Prints the final parameters as the signed 64-bit integers of their bits ("bits" lines), so a test can
 * compare them with the C++ core's reference (bindings_reference_f64).
 */
public final class SeedExample {
    static final int WORLD_SIZE = 4;

    static double[] train(CommunicationBackend<Double> backend, boolean print) {
        var model = new LinearModel(8);
        var options = new AdamOptimizerOptions();
        options.setLearningRate(0.05);
        options.setBatchSize(16);
        options.setMaxIterations(5);
        var inputData = new OptimizationInputData<Double, double[][], double[]>();
        inputData.XTrain = LinearModel.features(0, 64, 8);
        inputData.YTrain = LinearModel.targets(inputData.XTrain);
        inputData.XValidation = LinearModel.features(64, 16, 8);
        inputData.YValidation = LinearModel.targets(inputData.XValidation);
        inputData.XTest = LinearModel.features(80, 16, 8);
        inputData.YTest = LinearModel.targets(inputData.XTest);

        // ---- AiDotNet's example, ported ----
        // Original optimizer
        var optimizer = new AdamOptimizer<Double, double[][], double[]>(model, options);

        // Wrap it for FSDP distributed training
        var config = new ShardingConfiguration<Double>(backend);
        var fsdpOptimizer = new FSDPOptimizer<Double, double[][], double[]>(optimizer, config);

        // Now optimize as usual - FSDP magic happens automatically!
        var result = fsdpOptimizer.optimize(inputData);
        // ---- end of the example ----

        double[] last = fsdpOptimizer.getParametersDouble();
        if (print && backend.getRank() == 0) {
            System.out.printf("rank 0 of %d: training %s; validation %s; test %s%n", backend.getWorldSize(),
                              result.getTrainingResult(), result.getValidationResult(), result.getTestResult());
            for (double v : last) System.out.println("bits " + Double.doubleToRawLongBits(v));
        }
        fsdpOptimizer.close();
        return last;
    }

    public static void main(String[] args) throws Exception {
        boolean ucx = args.length > 0 && args[0].equals("ucx");
        double[] distributed;
        int rank = 0;
        if (ucx) {
            try (var backend = new UcxCommunicationBackend<Double>()) {
                rank = backend.getRank();
                if (backend.getWorldSize() != WORLD_SIZE) throw new AssertionError("world size " + backend.getWorldSize());
                distributed = train(backend, true);
            }
        } else {
            double[][] out = new double[WORLD_SIZE][];
            Throwable[] err = new Throwable[1];
            Thread[] threads = new Thread[WORLD_SIZE];
            for (int r = 0; r < WORLD_SIZE; ++r) {
                final int rr = r;
                threads[r] = new Thread(() -> {
                    try (var backend = new InMemoryCommunicationBackend<Double>(rr, WORLD_SIZE, "seed-example")) {
                        out[rr] = train(backend, true);
                    } catch (Throwable t) {
                        synchronized (err) { if (err[0] == null) err[0] = t; }
                    }
                });
                threads[r].start();
            }
            for (Thread t : threads) t.join();
            if (err[0] != null) throw new RuntimeException(err[0]);
            for (double[] o : out)
                if (!java.util.Arrays.equals(o, out[0])) throw new AssertionError("ranks ended with different parameters");
            distributed = out[0];
        }
        String reference = System.getenv("SHARDOPT_REFERENCE_F64"); // bindings_reference_f64: the C++ core's result
        if (reference != null && rank == 0) {
            Process p = new ProcessBuilder(reference).redirectErrorStream(true).start();
            String[] lines = new String(p.getInputStream().readAllBytes()).trim().split("\\s+");
            if (p.waitFor() != 0 || lines.length != distributed.length) throw new AssertionError("reference failed: " + String.join(" ", lines));
            for (int i = 0; i < lines.length; ++i)
                if (Long.parseLong(lines[i]) != Double.doubleToRawLongBits(distributed[i]))
                    throw new AssertionError("parameter " + i + " differs from the C++ core's reference: " + distributed[i] + " vs "
                                             + Double.longBitsToDouble(Long.parseLong(lines[i])));
            System.out.println("equal to the C++ core's reference bit for bit");
        }
        double[] single;
        try (var backend = new InMemoryCommunicationBackend<Double>(0, 1, "seed-example-single-" + rank)) {
            single = train(backend, false);
        }
        double worst = 0;
        for (int i = 0; i < single.length; ++i) worst = Math.max(worst, Math.abs(single[i] - distributed[i]));
        if (!(worst < 1e-9)) throw new AssertionError("differs from single-process training by " + worst);
        System.out.printf("%s rank %d: equal to single-process training (max difference %.3g)%n", ucx ? "ucx" : "in-memory", rank, worst);
    }
}
