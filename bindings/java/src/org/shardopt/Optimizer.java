package org.shardopt;

/** A base optimizer (AiDotNet's IOptimizer&lt;T, TInput, TOutput&gt;): its options and, in AiDotNet's form, the model it
 *  trains; a sharded optimizer wraps it. */
public abstract class Optimizer<T, TInput, TOutput> {
    final OptimizerOptions<T, TInput, TOutput> options;
    private final IGradientModel<T, TInput, TOutput> model;

    Optimizer(IGradientModel<T, TInput, TOutput> model, OptimizerOptions<T, TInput, TOutput> options) {
        if (options == null) throw new NullPointerException("options");
        this.options = options;
        this.model = model;
    }

    public OptimizerOptions<T, TInput, TOutput> getOptions() { return options; }
    /** The model given to the constructor, or null (optimize then takes a GradientModel). */
    public IGradientModel<T, TInput, TOutput> getModel() { return model; }
}
