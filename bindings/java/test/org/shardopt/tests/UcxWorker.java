package org.shardopt.tests;

import org.shardopt.*;
import org.shardopt.samples.MlpDemo;

/** One rank of TrainingTest.twoUcxProcesses, run under tools/shardopt-run -n 2. */
public final class UcxWorker {
    public static void main(String[] args) {
        MlpDemo model = new MlpDemo();
        try (UcxCommunicationBackend<Double> single = UcxCommunicationBackend.singleProcess()) {
            throw new AssertionError("singleProcess() under a launcher of 2 gave a world of " + single.getWorldSize());
        } catch (IllegalArgumentException e) {
            if (!e.getMessage().contains("the environment names a world of 2 ranks")) throw e;
        }
        try (UcxCommunicationBackend b = new UcxCommunicationBackend()) {
            if (b.getWorldSize() != 2) throw new AssertionError("world size " + b.getWorldSize());
            float[] p;
            OptimizationResult r;
            AdamOptimizerOptions o = new AdamOptimizerOptions();
            o.setBatchSize(128);
            o.setMaxIterations(3);
            try (ZeRO2Optimizer opt = new ZeRO2Optimizer(new AdamOptimizer(o), new ShardingConfiguration(b, 3e-3),
                                                         model.layout(), model.initialParameters())) {
                r = opt.optimize(model, new OptimizationInputData(model.samples));
                p = opt.getParametersFloat();
            }
            float[] lo = p.clone(), hi = p.clone();
            b.allReduce(lo, ReductionOperation.MIN);
            b.allReduce(hi, ReductionOperation.MAX);
            if (!java.util.Arrays.equals(lo, hi)) throw new AssertionError("ranks disagree on parameters");
            double[] h = r.getTrainingLossHistory();
            if (!(h[h.length - 1] < h[0])) throw new AssertionError("loss did not decrease");
            System.out.printf("ucx ok rank %d loss %.4f -> %.4f%n", b.getRank(), h[0], h[h.length - 1]);
        }
    }
}
