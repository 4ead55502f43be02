package org.shardopt;

/** What optimize() returns (AiDotNet's OptimizationResult). BestSolution: float[] or double[]. */
public final class OptimizationResult {
    private final Object bestSolution;
    private final double bestFitnessScore;
    private final long iterations;
    private final double[] fitnessHistory;
    private final boolean stoppedEarly;

    OptimizationResult(Object best, double score, long iterations, double[] history, boolean stoppedEarly) {
        this.bestSolution = best;
        this.bestFitnessScore = score;
        this.iterations = iterations;
        this.fitnessHistory = history;
        this.stoppedEarly = stoppedEarly;
    }

    public Object getBestSolution() { return bestSolution; }
    public double getBestFitnessScore() { return bestFitnessScore; }
    public long getIterations() { return iterations; }
    public double[] getFitnessHistory() { return fitnessHistory.clone(); }
    public boolean getStoppedEarly() { return stoppedEarly; }
}
