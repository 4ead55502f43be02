package org.shardopt;

/** A model in AiDotNet's shape (IFullModel): it owns its parameters and computes the loss and gradient over samples of
 *  its data. T (Double or Float) is the parameters' element type, which new ParameterLayout() takes; TInput the samples'
 *  features, TOutput their targets. new AdamOptimizer&lt;&gt;(model, options) wraps it; optimize(inputData) trains it. */
public interface IGradientModel<T, TInput, TOutput> {
    /** The parameter tensors in order. */
    ParameterLayout getParameterLayout();
    /** The current (initial) parameters, packed: double[] for T = Double, float[] for Float. */
    Object getParameters();
    /** Receives the trained parameters (the best solution) at the end of optimize; default: ignored. */
    default void setParameters(Object parameters) {}
    /** Number of samples (rows) in x. */
    long getSampleCount(TInput x);
    /** The mean loss over the sample rows of (x, y) at parameters, and the mean gradient into gradient (zeroed on entry)
     *  unless it is null (only the loss is asked for). The views are valid during the call only. */
    double computeLossAndGradient(NativeView parameters, NativeView gradient, TInput x, TOutput y, long[] samples);
}
