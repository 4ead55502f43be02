package org.shardopt;

import java.io.IOException;

/** AiDotNet's IShardedOptimizer, in Java naming. */
public interface IShardedOptimizer<T, TInput, TOutput> extends AutoCloseable {
    int getRank();
    int getWorldSize();
    Optimizer<T, TInput, TOutput> getWrappedOptimizer();
    ShardingConfiguration<T> getShardingConfiguration();
    void synchronizeOptimizerState();
    /** AiDotNet's Optimize(inputData): trains the wrapped optimizer's model. */
    OptimizationResult optimize(OptimizationInputData<T, TInput, TOutput> input);
    /** The lower-level form: a model over sample indices. */
    OptimizationResult optimize(GradientModel model, OptimizationInputData<T, TInput, TOutput> input);
    void reset();
    boolean shouldEarlyStop();
    OptimizerOptions<T, TInput, TOutput> getOptions();
    byte[] serialize() throws IOException;
    void deserialize(byte[] data) throws IOException;
    void saveModel(String path) throws IOException;
    void loadModel(String path) throws IOException;
    @Override void close();
}
