package org.shardopt;

import org.shardopt.internal.shardopt_sharding_options;

/** A data x tensor x pipeline process grid (dataParallelSize -1 = the rest of the world), ZeRO-2 inside each
 * data-parallel group. */
public class HybridShardedOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final int pipelineParallelSize, tensorParallelSize, dataParallelSize;

    public HybridShardedOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { this(wrappedOptimizer, config, 1, 1, -1); }

    public HybridShardedOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int pipelineParallelSize,
                                  int tensorParallelSize, int dataParallelSize) {
        super(wrappedOptimizer, config, HYBRID);
        this.pipelineParallelSize = pipelineParallelSize;
        this.tensorParallelSize = tensorParallelSize;
        this.dataParallelSize = dataParallelSize;
    }

    @Override
    void configure(shardopt_sharding_options s) {
        s.setPipeline_parallel_size(pipelineParallelSize);
        s.setTensor_parallel_size(tensorParallelSize);
        s.setData_parallel_size(dataParallelSize);
        s.setHybrid_data_strategy(ZERO2); // the library's default is DDP
    }

    public int getPipelineParallelSize() { return pipelineParallelSize; }
    public int getTensorParallelSize() { return tensorParallelSize; }
    public int getDataParallelSize() { return dataParallelSize; }
}
