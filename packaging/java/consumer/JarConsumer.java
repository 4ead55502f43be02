import org.shardopt.*;
import org.shardopt.samples.MlpDemo; // samples/java/MlpDemo.java, compiled beside this file

/** Compiled and run against shardopt.jar alone (packaging.jar): FSDP over Adam on 2 in-memory
 * ranks (one thread each) trains the demo MLP; the loss must fall. With the argument "ucx", one
 * rank of a UCX job instead (tools/shardopt-run -n 2 -- java -cp shardopt.jar:. JarConsumer ucx). */
@SuppressWarnings("unchecked")
public final class JarConsumer {
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("ucx")) {
            ucxRank();
            return;
        }
        final int world = 2;
        MlpDemo model = new MlpDemo(8, 16, 3, 256);
        OptimizationResult[] results = new OptimizationResult[world];
        Throwable[] errors = new Throwable[world];
        Thread[] ranks = new Thread[world];
        for (int r = 0; r < world; ++r) {
            final int rank = r;
            ranks[r] = new Thread(() -> {
                try (InMemoryCommunicationBackend backend = new InMemoryCommunicationBackend(rank, world, "jar-consumer")) {
                    try (FSDPOptimizer fsdp = new FSDPOptimizer(new AdamOptimizer(options()), new ShardingConfiguration(backend))) {
                        fsdp.initialize(model.layout(), model.initialParameters());
                        results[rank] = fsdp.optimize(model, new OptimizationInputData(model.samples));
                    }
                } catch (Throwable t) {
                    errors[rank] = t;
                }
            });
            ranks[r].start();
        }
        for (Thread t : ranks) t.join();
        for (Throwable t : errors) if (t != null) throw new RuntimeException(t);
        double[] h = results[0].getFitnessHistory();
        checkNatives();
        if (!(h[h.length - 1] < h[0])) {
            System.err.printf("loss did not decrease: %.4f -> %.4f%n", h[0], h[h.length - 1]);
            System.exit(1);
        }
        System.out.printf("Java consumer: FSDP Adam on %d in-memory ranks, loss %.4f -> %.4f%n", world, h[0], h[h.length - 1]);
    }

    /** Adam at 3e-3, 5 epochs of batches of 64 (the training settings are the options'). */
    static AdamOptimizerOptions options() {
        AdamOptimizerOptions options = new AdamOptimizerOptions();
        options.setLearningRate(3e-3);
        options.setBatchSize(64);
        options.setMaxIterations(5);
        options.setUseEarlyStopping(false);
        return options;
    }

    static void ucxRank() throws Exception {
        MlpDemo model = new MlpDemo(8, 16, 3, 256);
        try (UcxCommunicationBackend backend = new UcxCommunicationBackend()) {
            try (FSDPOptimizer fsdp = new FSDPOptimizer(new AdamOptimizer(options()), new ShardingConfiguration(backend))) {
                fsdp.initialize(model.layout(), model.initialParameters());
                double[] h = fsdp.optimize(model, new OptimizationInputData(model.samples)).getFitnessHistory();
                checkNatives();
                if (!(h[h.length - 1] < h[0])) {
                    System.err.printf("loss did not decrease: %.4f -> %.4f%n", h[0], h[h.length - 1]);
                    System.exit(1);
                }
                System.out.printf("Java consumer: FSDP Adam, UCX rank %d of %d, loss %.4f -> %.4f%n", fsdp.getRank(),
                                  fsdp.getWorldSize(), h[0], h[h.length - 1]);
            }
        }
    }

    /** The natives must be the jar's, extracted under java.io.tmpdir. */
    static void checkNatives() throws Exception {
        String tmp = new java.io.File(System.getProperty("java.io.tmpdir")).getCanonicalPath();
        int found = 0;
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/self/maps"))) {
            int at = line.indexOf('/');
            if (at < 0 || !line.contains("libshardopt")) continue;
            String path = line.substring(at);
            if (!path.startsWith(tmp + "/")) {
                System.err.println("a native library was not loaded from the jar: " + path);
                System.exit(1);
            }
            ++found;
        }
        if (found == 0) {
            System.err.println("no libshardopt library is mapped");
            System.exit(1);
        }
    }
}
