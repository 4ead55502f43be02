package org.shardopt;

/** What optimize returns (AiDotNet's OptimizationResult). An epoch is a pass over the training set, a step one optimizer
 *  step; an epoch's score is its validation loss when a validation set was given, else its mean training loss. */
public final class OptimizationResult {
    /** The loss of the best solution over one whole set (AiDotNet's DatasetResult). */
    public static final class DatasetResult {
        private final double loss;
        private final long samples;

        DatasetResult(double loss, long samples) { this.loss = loss; this.samples = samples; }

        public double getLoss() { return loss; }
        public long getSampleCount() { return samples; }
        @Override public String toString() { return "loss " + loss + " over " + samples + " samples"; }
    }

    private final Object bestSolution;
    private final double[] training, validation, rates;
    private final int epochs, bestEpoch;
    private final long steps;
    private final double bestScore;
    private final boolean stoppedEarly, validated;
    private final DatasetResult trainingResult, validationResult, testResult;

    OptimizationResult(Object best, double[][] histories, int epochs, long steps, int bestEpoch, double bestScore, boolean stoppedEarly,
                       long[] sizes, double[] losses) {
        this.bestSolution = best;
        this.training = histories[0];
        this.validation = histories[1];
        this.rates = histories[2];
        this.epochs = epochs;
        this.steps = steps;
        this.bestEpoch = bestEpoch;
        this.bestScore = bestScore;
        this.stoppedEarly = stoppedEarly;
        this.validated = sizes[1] > 0;
        trainingResult = new DatasetResult(losses[0], sizes[0]);
        validationResult = sizes[1] > 0 ? new DatasetResult(losses[1], sizes[1]) : null;
        testResult = sizes[2] > 0 ? new DatasetResult(losses[2], sizes[2]) : null;
    }

    /** The best epoch's parameters, packed: double[] or float[]. */
    public Object getBestSolution() { return bestSolution instanceof float[] ? ((float[]) bestSolution).clone() : ((double[]) bestSolution).clone(); }
    /** The best epoch's score. */
    public double getBestFitnessScore() { return bestScore; }
    /** The best epoch, from 0. */
    public int getBestEpoch() { return bestEpoch; }
    /** Epochs run (AiDotNet's Iterations: an iteration is an epoch). */
    public int getIterations() { return epochs; }
    /** Optimizer steps run. */
    public long getSteps() { return steps; }
    public boolean getStoppedEarly() { return stoppedEarly; }
    /** Each epoch's score. */
    public double[] getFitnessHistory() { return (validated ? validation : training).clone(); }
    /** Each epoch's mean training loss (over its batches). */
    public double[] getTrainingLossHistory() { return training.clone(); }
    /** Each epoch's validation loss (NaN without a validation set). */
    public double[] getValidationLossHistory() { return validation.clone(); }
    /** The learning rate of each epoch's first step. */
    public double[] getLearningRateHistory() { return rates.clone(); }
    /** The best solution's loss over the training, validation and test sets (null for a set not given). */
    public DatasetResult getTrainingResult() { return trainingResult; }
    public DatasetResult getValidationResult() { return validationResult; }
    public DatasetResult getTestResult() { return testResult; }
}
