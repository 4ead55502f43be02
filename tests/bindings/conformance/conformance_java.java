/* The conformance suite's Java driver (README.md in this folder): every run of runs.txt through the Java binding's
 * idiomatic API, AiDotNet's data form: a model class computing the README's model, InMemoryCommunicationBackend ranks on
 * threads, the optimizer class of `strategy` over the options class of `optimizer`, every absent key left at the API's
 * default. Usage: java -cp shardopt.jar:<classes> ConformanceJava RUNS_FILE [RUN_NAME...] */
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.*;
import org.shardopt.*;

final class ConformanceJava {
    static final int FEATURES = 8, TRAIN = 64, VALID = 32, TEST = 16;

    // ---- the model (README.md, "The model"): rows of x (n x 8) and y (n), a linear model in doubles ----
    static double feature(long r, int j) { return (double) ((7 * r + 3 * j) % 11 - 5) / 8.0; }

    static double target(long r) {
        double acc = 0.0;
        for (int j = 0; j < FEATURES; ++j) acc += 0.125 * (double) (j + 1) * feature(r, j);
        return acc + 0.25 + (double) ((37 * r) % 17 - 8) / 16.0;
    }

    static Tensor<Double> x(int from, int n) {
        double[] v = new double[n * FEATURES];
        for (int i = 0; i < n; ++i) for (int j = 0; j < FEATURES; ++j) v[i * FEATURES + j] = feature(from + i, j);
        return Tensor.of(new int[] {n, FEATURES}, v);
    }

    static Tensor<Double> y(int from, int n) {
        double[] v = new double[n];
        for (int i = 0; i < n; ++i) v[i] = target(from + i);
        return Tensor.of(new int[] {n}, v);
    }

    /** weight (8, or a rows x cols matrix of 8: the run's `matrix` key) and bias (1), initially 0; T (Double or
     *  Float) is the element type of the parameters. */
    static class Linear<T> implements IGradientModel<T, Tensor<Double>, Tensor<Double>> {
        private final boolean f32;
        private final long rows, cols;
        Linear(boolean f32, long rows, long cols) { this.f32 = f32; this.rows = rows; this.cols = cols; }
        @Override public ParameterLayout getParameterLayout() {
            ParameterLayout layout = new ParameterLayout();
            return (rows > 0 ? layout.addMatrix("weight", rows, cols) : layout.add("weight", FEATURES)).add("bias", 1);
        }
        @Override public Object getParameters() { return f32 ? new float[FEATURES + 1] : new double[FEATURES + 1]; }
        @Override public long getSampleCount(Tensor<Double> x) { return x.getShape()[0]; }

        @Override
        public double computeLossAndGradient(NativeView p, NativeView g, Tensor<Double> x, Tensor<Double> y, long[] samples) {
            double[] w = new double[FEATURES + 1], gw = new double[FEATURES];
            for (int k = 0; k <= FEATURES; ++k) w[k] = p.get(k);
            double loss = 0.0, gb = 0.0;
            for (long s : samples) {
                int i = (int) s;
                double pred = 0.0;
                for (int j = 0; j < FEATURES; ++j) pred += w[j] * x.get(i, j);
                double err = pred + w[FEATURES] - y.get(i);
                loss += 0.5 * err * err;
                for (int j = 0; j < FEATURES; ++j) gw[j] += err * x.get(i, j);
                gb += err;
            }
            double n = samples.length;
            if (g != null) {
                for (int j = 0; j < FEATURES; ++j) g.set(j, gw[j] / n);
                g.set(FEATURES, gb / n);
            }
            return loss / n;
        }
    }
    static final class Linear64 extends Linear<Double> { Linear64(long rows, long cols) { super(false, rows, cols); } }
    static final class Linear32 extends Linear<Float> { Linear32(long rows, long cols) { super(true, rows, cols); } }

    // ---- one rank of a run ----
    static OptimizerOptions<Double, Tensor<Double>, Tensor<Double>> options(Map<String, String> r) {
        OptimizerOptions<Double, Tensor<Double>, Tensor<Double>> o;
        switch (r.get("optimizer")) {
            case "sgd": o = new StochasticGradientDescentOptimizerOptions<>(); break;
            case "momentum": o = new MomentumOptimizerOptions<>(); break;
            case "adam": o = new AdamOptimizerOptions<>(); break;
            case "adamw": o = new AdamWOptimizerOptions<>(); break;
            case "rmsprop": o = new RootMeanSquarePropagationOptimizerOptions<>(); break;
            case "adagrad": o = new AdagradOptimizerOptions<>(); break;
            case "lamb": o = new LambOptimizerOptions<>(); break;
            case "lion": o = new LionOptimizerOptions<>(); break;
            case "adafactor": o = new AdafactorOptimizerOptions<>(); break;
            case "nadam": o = new NadamOptimizerOptions<>(); break;
            case "adamax": o = new AdaMaxOptimizerOptions<>(); break;
            case "adadelta": o = new AdaDeltaOptimizerOptions<>(); break;
            case "muon": o = new MuonOptimizerOptions<>(); break;
            default: throw new IllegalArgumentException("unknown optimizer " + r.get("optimizer"));
        }
        String v;
        if ((v = r.get("lr")) != null) o.setInitialLearningRate(Double.parseDouble(v));
        if ((v = r.get("batch")) != null) o.setBatchSize(Long.parseLong(v));
        if ((v = r.get("max_steps")) != null) o.setMaxSteps(Long.parseLong(v));
        if ((v = r.get("shuffle")) != null) o.setShuffleData(v.equals("1"));
        if ((v = r.get("seed")) != null) o.setRandomSeed(Long.parseUnsignedLong(v));
        if ((v = r.get("early_stopping")) != null) o.setUseEarlyStopping(v.equals("1"));
        if ((v = r.get("patience")) != null) o.setEarlyStoppingPatience(Integer.parseInt(v));
        if ((v = r.get("tolerance")) != null) o.setTolerance(Double.parseDouble(v));
        if ((v = r.get("schedule")) != null) {
            LearningRateSchedule s;
            switch (v) {
                case "constant": s = LearningRateSchedule.constant(); break;
                case "warmup": s = LearningRateSchedule.warmup(Long.parseLong(r.get("warmup"))); break;
                case "cosine": s = LearningRateSchedule.cosine(); break;
                case "step_decay": s = LearningRateSchedule.stepDecay(); break;
                case "warmup_cosine": s = LearningRateSchedule.warmupCosine(Long.parseLong(r.get("warmup"))); break;
                case "warmup_step_decay": s = LearningRateSchedule.warmupStepDecay(Long.parseLong(r.get("warmup"))); break;
                case "custom": s = LearningRateSchedule.custom((t, base) -> base / (1.0 + (double) t / 2.0)); break;
                default: throw new IllegalArgumentException("unknown schedule " + v);
            }
            if ((v = r.get("decay_period")) != null) s.decayPeriod(Long.parseLong(v));
            if ((v = r.get("min_lr")) != null) s.minLearningRate(Double.parseDouble(v));
            if ((v = r.get("gamma")) != null) s.gamma(Double.parseDouble(v));
            if ("1".equals(r.get("per_step"))) s.perStep();
            o.setLearningRateSchedule(s);
        }
        return o;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Optimizer<Double, Tensor<Double>, Tensor<Double>> optimizer(Map<String, String> r, IGradientModel model,
                                                                       OptimizerOptions<Double, Tensor<Double>, Tensor<Double>> o) {
        switch (r.get("optimizer")) {
            case "sgd": return new StochasticGradientDescentOptimizer<>(model, (StochasticGradientDescentOptimizerOptions) o);
            case "momentum": return new MomentumOptimizer<>(model, (MomentumOptimizerOptions) o);
            case "adam": return new AdamOptimizer<>(model, (AdamOptimizerOptions) o);
            case "adamw": return new AdamWOptimizer<>(model, (AdamWOptimizerOptions) o);
            case "rmsprop": return new RootMeanSquarePropagationOptimizer<>(model, (RootMeanSquarePropagationOptimizerOptions) o);
            case "adagrad": return new AdagradOptimizer<>(model, (AdagradOptimizerOptions) o);
            case "lamb": return new LambOptimizer<>(model, (LambOptimizerOptions) o);
            case "lion": return new LionOptimizer<>(model, (LionOptimizerOptions) o);
            case "adafactor": return new AdafactorOptimizer<>(model, (AdafactorOptimizerOptions) o);
            case "nadam": return new NadamOptimizer<>(model, (NadamOptimizerOptions) o);
            case "adamax": return new AdaMaxOptimizer<>(model, (AdaMaxOptimizerOptions) o);
            case "adadelta": return new AdaDeltaOptimizer<>(model, (AdaDeltaOptimizerOptions) o);
            case "muon": return new MuonOptimizer<>(model, (MuonOptimizerOptions) o);
            default: throw new IllegalArgumentException("unknown optimizer " + r.get("optimizer"));
        }
    }

    static ShardingConfiguration<Double> configuration(Map<String, String> r, CommunicationBackend<Double> b) {
        String v = r.get("preset");
        ShardingConfiguration<Double> c = v == null ? new ShardingConfiguration<>(b) : v.equals("default") ? ShardingConfiguration.createDefault(b)
                : v.equals("high_bandwidth") ? ShardingConfiguration.createForHighBandwidth(b) : ShardingConfiguration.createForLowBandwidth(b);
        if ((v = r.get("config_lr")) != null) c.setLearningRate(Double.parseDouble(v));
        if ((v = r.get("group")) != null) c.setMinimumParameterGroupSize(Integer.parseInt(v));
        if ((v = r.get("local_steps")) != null) c.setLocalSteps(Integer.parseInt(v));
        if ("0".equals(r.get("auto_sync"))) c.setAutoSyncGradients(false);
        if ((v = r.get("accumulation")) != null) c.setGradientAccumulationSteps(Integer.parseInt(v));
        if ((v = r.get("memory")) != null) c.setMemory(v.equals("cuda") ? MemorySpace.CUDA : MemorySpace.HOST);
        return c;
    }

    static ShardedOptimizer<Double, Tensor<Double>, Tensor<Double>> sharded(Map<String, String> r, Optimizer<Double, Tensor<Double>, Tensor<Double>> w,
                                                                           ShardingConfiguration<Double> c) {
        switch (r.get("strategy")) {
            case "ddp": return new DDPOptimizer<>(w, c);
            case "zero1": return new ZeRO1Optimizer<>(w, c);
            case "zero2": return new ZeRO2Optimizer<>(w, c);
            case "fsdp": return new FSDPOptimizer<>(w, c);
            case "hybrid":
                String d = r.get("data_strategy");
                return new HybridShardedOptimizer<>(w, c, 1, 1, -1, d == null ? null : HybridShardedOptimizer.DataStrategy.valueOf(d.toUpperCase()));
            case "local_sgd": return new LocalSGDOptimizer<>(w, c);
            case "async_sgd":
                String s = r.get("staleness");
                return s == null ? new AsyncSGDOptimizer<>(w, c) : new AsyncSGDOptimizer<>(w, c, Integer.parseInt(s));
            default: throw new IllegalArgumentException("unknown strategy " + r.get("strategy"));
        }
    }

    static String hex(String word, double... v) {
        StringBuilder s = new StringBuilder(word);
        for (double d : v) s.append(String.format(" %016x", Double.doubleToRawLongBits(d)));
        return s.append('\n').toString();
    }

    static double[] doubles(Object packed) {
        if (packed instanceof double[]) return (double[]) packed;
        float[] f = (float[]) packed;
        double[] d = new double[f.length];
        for (int i = 0; i < f.length; ++i) d[i] = f[i];
        return d;
    }

    /** One rank: trains as the run says and returns what it prints. */
    static String rank(String name, Map<String, String> r, CommunicationBackend<Double> b) throws Exception {
        long rows = 0, cols = 0;
        if (r.containsKey("matrix")) {
            String[] rc = r.get("matrix").split("x");
            rows = Long.parseLong(rc[0]);
            cols = Long.parseLong(rc[1]);
        }
        IGradientModel<?, Tensor<Double>, Tensor<Double>> model =
            r.get("dtype").equals("f32") ? new Linear32(rows, cols) : new Linear64(rows, cols);
        OptimizerOptions<Double, Tensor<Double>, Tensor<Double>> o = options(r);
        ShardingConfiguration<Double> c = configuration(r, b);
        var data = new OptimizationInputData<Double, Tensor<Double>, Tensor<Double>>(x(0, TRAIN), y(0, TRAIN));
        if (r.containsKey("validation")) { data.XValidation = x(TRAIN, VALID); data.YValidation = y(TRAIN, VALID); }
        if (r.containsKey("test")) { data.XTest = x(TRAIN + VALID, TEST); data.YTest = y(TRAIN + VALID, TEST); }
        int epochs = r.containsKey("epochs") ? Integer.parseInt(r.get("epochs")) : o.getMaxIterations();
        ShardedOptimizer<Double, Tensor<Double>, Tensor<Double>> opt = sharded(r, optimizer(r, model, o), c);
        try {
            if (r.containsKey("resume_after")) {
                o.setMaxIterations(Integer.parseInt(r.get("resume_after")));
                opt.optimize(data);
                byte[] checkpoint = opt.serialize();
                opt.close();
                opt = sharded(r, optimizer(r, model, o), c);
                opt.deserialize(checkpoint);
            }
            o.setMaxIterations(epochs);
            OptimizationResult res = opt.optimize(data);
            return "run " + name + "\n" + hex("params", doubles(opt.packedParameters())) + hex("best", doubles(res.getBestSolution()))
                 + hex("training", res.getTrainingLossHistory()) + hex("validation", res.getValidationLossHistory())
                 + hex("lr", res.getLearningRateHistory())
                 + String.format("counts %d %d %d %d%n", res.getIterations(), res.getSteps(), res.getBestEpoch(), res.getStoppedEarly() ? 1 : 0)
                 + hex("losses", res.getBestFitnessScore(), res.getTrainingResult().getLoss(),
                       res.getValidationResult() == null ? Double.NaN : res.getValidationResult().getLoss(),
                       res.getTestResult() == null ? Double.NaN : res.getTestResult().getLoss())
                 + (opt.getMemory() == MemorySpace.CUDA ? "memory cuda\n" : "");
        } finally {
            opt.close();
        }
    }

    /** A launched run: this process is one rank of a job under shardopt-run, on the run's backend from the
     *  launcher's environment; rank 0 prints. */
    static boolean runLaunched(String name, Map<String, String> r) {
        String backend = r.get("backend");
        try (CommunicationBackend<Double> b = backend.equals("staged") ? new StagedCommunicationBackend<Double>()
                                             : backend.equals("nccl") ? new NCCLCommunicationBackend<Double>()
                                             : new UcxCommunicationBackend<Double>()) {
            if (b.getWorldSize() != Integer.parseInt(r.get("ranks")))
                throw new IllegalStateException("launched with " + b.getWorldSize() + " ranks, the run has " + r.get("ranks"));
            String text = rank(name, r, b);
            if (b.getRank() == 0) {
                System.out.print(text);
                System.out.flush();
            }
            return true;
        } catch (Throwable t) {
            System.err.println("run " + name + ": " + t);
            return false;
        }
    }

    /** Runs every rank on its own thread; prints rank 0's output when every rank agrees. */
    static boolean run(String name, Map<String, String> r) throws InterruptedException {
        if (r.containsKey("backend")) return runLaunched(name, r);
        int ranks = Integer.parseInt(r.get("ranks"));
        String[] out = new String[ranks];
        Throwable[] errors = new Throwable[ranks];
        Thread[] threads = new Thread[ranks];
        for (int k = 0; k < ranks; ++k) {
            final int rank = k;
            threads[k] = new Thread(() -> {
                try (var b = new InMemoryCommunicationBackend<Double>(rank, ranks, "conformance-" + name)) {
                    out[rank] = rank(name, r, b);
                } catch (Throwable t) {
                    errors[rank] = t;
                }
            });
            threads[k].start();
        }
        for (Thread t : threads) t.join();
        for (int k = 0; k < ranks; ++k) {
            if (errors[k] != null) {
                System.err.println("run " + name + ": rank " + k + ": " + errors[k]);
                return false;
            }
            if (!out[k].equals(out[0])) {
                System.err.println("run " + name + ": rank " + k + "'s results differ from rank 0's");
                return false;
            }
        }
        System.out.print(out[0]);
        System.out.flush();
        return true;
    }

    public static void main(String[] args) throws Exception {
        Set<String> only = new HashSet<>(Arrays.asList(args).subList(1, args.length));
        boolean ok = true;
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            String[] tok = line.trim().split("\\s+");
            if (tok[0].isEmpty() || tok[0].startsWith("#") || (!only.isEmpty() && !only.contains(tok[0]))) continue;
            Map<String, String> r = new HashMap<>();
            for (int i = 1; i < tok.length; ++i) r.put(tok[i].substring(0, tok[i].indexOf('=')), tok[i].substring(tok[i].indexOf('=') + 1));
            ok &= run(tok[0], r);
        }
        System.exit(ok ? 0 : 1);
    }
}
