package org.shardopt;

/** What optimize returns (AiDotNet's OptimizationResult). An epoch is a pass over the training set, a step one optimizer
 *  step; an epoch's score is its validation loss when a validation set was given, else its mean training loss. */
public final class OptimizationResult {
    /** The best solution's loss over one whole set (AiDotNet's DatasetResult). */
    public static final class DatasetResult {
        private final double loss;
        private final long samples;
        DatasetResult(double loss, long samples) { this.loss = loss; this.samples = samples; }
        public double getLoss() { return loss; }
        public long getSampleCount() { return samples; }
        @Override public String toString() { return "loss " + loss + " over " + samples + " samples"; }
    }
    private final Object best;
    private final double[][] histories; // training, validation, learning rate
    private final int epochs, bestEpoch;
    private final long steps;
    private final double bestScore;
    private final boolean stoppedEarly;
    private final DatasetResult[] sets = new DatasetResult[3]; // training, validation, test
    OptimizationResult(Object best, double[][] histories, int epochs, long steps, int bestEpoch, double bestScore, boolean stoppedEarly,
                       long[] sizes, double[] losses) {
        this.best = best;
        this.histories = histories;
        this.epochs = epochs;
        this.steps = steps;
        this.bestEpoch = bestEpoch;
        this.bestScore = bestScore;
        this.stoppedEarly = stoppedEarly;
        for (int k = 0; k < 3; ++k) sets[k] = sizes[k] > 0 ? new DatasetResult(losses[k], sizes[k]) : null;
    }
    /** The best epoch's parameters, packed: double[] or float[]. */
    public Object getBestSolution() { return best instanceof float[] ? ((float[]) best).clone() : ((double[]) best).clone(); }
    /** The best epoch's score. */
    public double getBestFitnessScore() { return bestScore; }
    /** The best epoch, from 0. */
    public int getBestEpoch() { return bestEpoch; }
    /** Epochs run (AiDotNet's Iterations: an iteration is an epoch). */
    public int getIterations() { return epochs; }
    public long getSteps() { return steps; }
    public boolean getStoppedEarly() { return stoppedEarly; }
    /** Each epoch's score. */
    public double[] getFitnessHistory() { return histories[sets[1] != null ? 1 : 0].clone(); }
    /** Each epoch's mean training loss over its batches. */
    public double[] getTrainingLossHistory() { return histories[0].clone(); }
    /** Each epoch's validation loss (NaN without a validation set). */
    public double[] getValidationLossHistory() { return histories[1].clone(); }
    /** The learning rate of each epoch's first step. */
    public double[] getLearningRateHistory() { return histories[2].clone(); }
    /** The best solution's loss over the training, validation and test sets (null for a set not given). */
    public DatasetResult getTrainingResult() { return sets[0]; }
    public DatasetResult getValidationResult() { return sets[1]; }
    public DatasetResult getTestResult() { return sets[2]; }
}
