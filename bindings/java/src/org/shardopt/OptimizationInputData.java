package org.shardopt;

/** The data set is the sample indices [0, numSamples), split across data-parallel ranks. */
public final class OptimizationInputData {
    public long numSamples;
    public long batchSize;      // global batch per step; 0 = the whole data set
    public int epochs = 1;
    public long maxIterations;  // 0 = no limit beyond epochs
    public int patience;        // epochs without improvement before stopping; 0 = never
    public double minDelta;

    public OptimizationInputData(long numSamples, long batchSize, int epochs) {
        this.numSamples = numSamples;
        this.batchSize = batchSize;
        this.epochs = epochs;
    }
}
