package org.shardopt;

/** A base optimizer (AiDotNet's IOptimizer&lt;T, TInput, TOutput&gt;): its options and, in AiDotNet's form,
 * the model it trains; wrapped by a sharded optimizer. T is Double or Float (the model's layout says which). */
public abstract class Optimizer<T, TInput, TOutput> {
    final OptimizerOptions options;
    private final IGradientModel<T, TInput, TOutput> model;

    protected Optimizer(IGradientModel<T, TInput, TOutput> model, OptimizerOptions options) {
        if (options == null) throw new NullPointerException("options");
        this.options = options;
        this.model = model;
    }

    public OptimizerOptions getOptions() { return options; }
    /** The model given to the constructor, or null (then optimize takes a GradientModel callback). */
    public IGradientModel<T, TInput, TOutput> getModel() { return model; }
}
