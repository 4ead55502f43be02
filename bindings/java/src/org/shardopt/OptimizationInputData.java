package org.shardopt;

/**
 * What optimize() trains on (AiDotNet's OptimizationInputData). With a model (AiDotNet's form):
 * XTrain/YTrain are trained on; XValidation/YValidation, when given, choose the best solution (the epoch
 * with the lowest validation loss) and drive early stopping; XTest/YTest are only scored. The lower-level
 * callback form uses numSamples (sample indices [0, numSamples), split across data-parallel ranks).
 * batchSize/epochs/shuffle/seed/patience set here override the optimizer options' (0 / unset = the options').
 */
public final class OptimizationInputData<T, TInput, TOutput> {
    public TInput XTrain, XValidation, XTest;
    public TOutput YTrain, YValidation, YTest;

    public long numSamples;
    public long batchSize;      // global batch per step; 0 = the options' (callback form: the whole data set)
    public int epochs;          // 0 = the options' MaxIterations (callback form: 1)
    public long maxIterations;  // steps; 0 = no limit beyond epochs
    public int patience;        // epochs without improvement before stopping; 0 = never
    public double minDelta;
    /** Shuffle every epoch with seed (the same permutation on every rank); null = the options'. */
    public Boolean shuffle;
    public long seed;

    public OptimizationInputData() {}

    public OptimizationInputData(long numSamples, long batchSize, int epochs) {
        this.numSamples = numSamples;
        this.batchSize = batchSize;
        this.epochs = epochs;
    }

    public OptimizationInputData(TInput xTrain, TOutput yTrain) {
        this.XTrain = xTrain;
        this.YTrain = yTrain;
    }
}
