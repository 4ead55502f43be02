package org.shardopt;

/**
 * What optimize trains on (AiDotNet's OptimizationInputData): data only, the training settings are the options'. With
 * a model: XTrain/YTrain are trained on; XValidation/YValidation, when given, score each epoch (the best epoch, early
 * stopping); XTest/YTest are only scored. The lower-level form (optimize(GradientModel, inputData)) takes the sizes of
 * the sets instead: the model gets sample indices into them.
 */
public final class OptimizationInputData<T, TInput, TOutput> {
    public TInput XTrain, XValidation, XTest;
    public TOutput YTrain, YValidation, YTest;
    /** The lower-level form: the training, validation and test sets' sizes (0: no such set). */
    public long numSamples, numValidationSamples, numTestSamples;

    public OptimizationInputData() {}

    /** The lower-level form: a training set of numSamples samples. */
    public OptimizationInputData(long numSamples) { this.numSamples = numSamples; }

    public OptimizationInputData(TInput xTrain, TOutput yTrain) {
        this.XTrain = xTrain;
        this.YTrain = yTrain;
    }
}
