package org.shardopt;

/** A base optimizer (AiDotNet's IOptimizer): its options and, in AiDotNet's form, the model it trains. */
public abstract class Optimizer<T, TInput, TOutput> {
    final OptimizerOptions<T, TInput, TOutput> options;
    private final IGradientModel<T, TInput, TOutput> model;
    Optimizer(IGradientModel<T, TInput, TOutput> model, OptimizerOptions<T, TInput, TOutput> options) {
        this.options = java.util.Objects.requireNonNull(options, "options");
        this.model = model;
    }
    public OptimizerOptions<T, TInput, TOutput> getOptions() { return options; }
    /** The model given to the constructor, or null (optimize then takes a GradientModel). */
    public IGradientModel<T, TInput, TOutput> getModel() { return model; }
}
