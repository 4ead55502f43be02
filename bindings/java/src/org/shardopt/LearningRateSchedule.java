package org.shardopt;

/** The learning rate of each epoch, from the base rate (the options' or the configuration's). optimize()
 * sets it through the C ABI before each epoch, on every rank alike. Also a callback: a lambda. */
@FunctionalInterface
public interface LearningRateSchedule {
    /** The rate for epoch (0-based) given the base rate. */
    double learningRate(int epoch, double baseLearningRate);

    /** Linear warm-up from base/warmupEpochs to base over warmupEpochs epochs, then constant. */
    static LearningRateSchedule warmup(int warmupEpochs) {
        if (warmupEpochs < 1) throw new IllegalArgumentException("warmupEpochs must be >= 1 (got " + warmupEpochs + ")");
        return (e, base) -> e < warmupEpochs ? base * (e + 1) / warmupEpochs : base;
    }

    /** Cosine annealing from base to minLearningRate over totalEpochs (torch's CosineAnnealingLR). */
    static LearningRateSchedule cosine(int totalEpochs, double minLearningRate) {
        if (totalEpochs < 1) throw new IllegalArgumentException("totalEpochs must be >= 1 (got " + totalEpochs + ")");
        return (e, base) -> minLearningRate + (base - minLearningRate) * (1 + Math.cos(Math.PI * Math.min(e, totalEpochs) / totalEpochs)) / 2;
    }

    /** base * gamma^(epoch / stepEpochs) (torch's StepLR). */
    static LearningRateSchedule stepDecay(int stepEpochs, double gamma) {
        if (stepEpochs < 1) throw new IllegalArgumentException("stepEpochs must be >= 1 (got " + stepEpochs + ")");
        return (e, base) -> base * Math.pow(gamma, e / stepEpochs);
    }
}
