package org.shardopt;

/** What optimize trains on (AiDotNet's OptimizationInputData): data only, the settings are the options'. XTrain/YTrain
 *  are trained on; XValidation/YValidation, when given, score each epoch; XTest/YTest are scored at the end. The
 *  lower-level form (optimize(GradientModel, inputData)) takes the sets' sizes (0: no such set) instead. */
public final class OptimizationInputData<T, TInput, TOutput> {
    public TInput XTrain, XValidation, XTest;
    public TOutput YTrain, YValidation, YTest;
    public long numSamples, numValidationSamples, numTestSamples;
    public OptimizationInputData() {}
    public OptimizationInputData(long numSamples) { this.numSamples = numSamples; }
    public OptimizationInputData(TInput xTrain, TOutput yTrain) { XTrain = xTrain; YTrain = yTrain; }
}
