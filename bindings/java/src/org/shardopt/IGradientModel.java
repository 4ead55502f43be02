package org.shardopt;

/**
 * A model in AiDotNet's shape (IFullModel): it owns its parameters and computes the loss and gradient for a
 * batch of its data. TInput holds the samples' features (e.g. double[][] rows), TOutput their targets.
 * The optimizer is constructed with the model (new AdamOptimizer&lt;&gt;(model, options)) and
 * optimize(OptimizationInputData) trains it.
 */
public interface IGradientModel<T, TInput, TOutput> {
    /** The parameter tensors in order and their element type (FLOAT64 for T = Double). */
    ParameterLayout getParameterLayout();

    /** The current (initial) parameters, packed: float[] for FLOAT32, double[] for FLOAT64. */
    Object getParameters();

    /** Receives the trained parameters (the best solution) at the end of optimize; default: ignored. */
    default void setParameters(Object parameters) {}

    /** Number of samples (rows) in x. */
    long getSampleCount(TInput x);

    /**
     * The mean loss over the given sample rows of (x, y) at parameters, with the mean gradient written into
     * gradient (zeroed on entry). The views are valid during the call only.
     */
    double computeLossAndGradient(NativeView parameters, NativeView gradient, TInput x, TOutput y, long[] samples);
}
