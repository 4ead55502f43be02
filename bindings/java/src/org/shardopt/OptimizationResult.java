package org.shardopt;

/** What optimize() returns (AiDotNet's OptimizationResult). BestSolution: float[] or double[] (packed). */
public final class OptimizationResult {
    /** The loss of the best solution on one data set (training, validation or test). */
    public static final class DatasetResult {
        private final double loss;
        private final long samples;

        DatasetResult(double loss, long samples) { this.loss = loss; this.samples = samples; }

        public double getLoss() { return loss; }
        public long getSampleCount() { return samples; }
        @Override public String toString() { return "loss " + loss + " over " + samples + " samples"; }
    }

    private final Object bestSolution;
    private final double bestFitnessScore;
    private final long iterations;
    private final double[] fitnessHistory;
    private final boolean stoppedEarly;
    DatasetResult training, validation, test;
    double[] validationHistory;

    OptimizationResult(Object best, double score, long iterations, double[] history, boolean stoppedEarly) {
        this.bestSolution = best;
        this.bestFitnessScore = score;
        this.iterations = iterations;
        this.fitnessHistory = history;
        this.stoppedEarly = stoppedEarly;
    }

    public Object getBestSolution() { return bestSolution; }
    /** The best solution's score: its validation loss when validation data was given, else its training loss. */
    public double getBestFitnessScore() { return bestFitnessScore; }
    public long getIterations() { return iterations; }
    /** The mean training loss of each epoch. */
    public double[] getFitnessHistory() { return fitnessHistory.clone(); }
    /** The validation loss after each epoch (empty without validation data). */
    public double[] getValidationHistory() { return validationHistory == null ? new double[0] : validationHistory.clone(); }
    public boolean getStoppedEarly() { return stoppedEarly; }
    /** The best solution's loss on XTrain/YTrain, XValidation/YValidation, XTest/YTest (null when not given
     *  or when optimize ran in the callback form). */
    public DatasetResult getTrainingResult() { return training; }
    public DatasetResult getValidationResult() { return validation; }
    public DatasetResult getTestResult() { return test; }
}
