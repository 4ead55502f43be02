package org.shardopt;

import java.io.IOException;

/** AiDotNet's IShardedOptimizer, in Java naming. */
public interface IShardedOptimizer extends AutoCloseable {
    int getRank();
    int getWorldSize();
    Optimizer getWrappedOptimizer();
    ShardingConfiguration getShardingConfiguration();
    void synchronizeOptimizerState();
    OptimizationResult optimize(GradientModel model, OptimizationInputData input);
    boolean shouldEarlyStop();
    OptimizerOptions getOptions();
    byte[] serialize() throws IOException;
    void deserialize(byte[] data) throws IOException;
    void saveModel(String path) throws IOException;
    void loadModel(String path) throws IOException;
    @Override
    void close();
}
