package org.shardopt;

/** A data x tensor x pipeline process grid (dataParallelSize -1: the rest of the world) with dataStrategy inside each
 *  data-parallel group (null: the library's default, DDP). */
public class HybridShardedOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    /** The strategy inside each data-parallel group (shardopt_strategy's first four, in order). */
    public enum DataStrategy { DDP, ZERO1, ZERO2, FSDP }
    private final int pipelineParallelSize, tensorParallelSize, dataParallelSize;
    public HybridShardedOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { this(wrappedOptimizer, config, 1, 1, -1); }
    public HybridShardedOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int pipelineParallelSize,
                                  int tensorParallelSize, int dataParallelSize) {
        this(wrappedOptimizer, config, pipelineParallelSize, tensorParallelSize, dataParallelSize, null);
    }
    public HybridShardedOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, int pipelineParallelSize,
                                  int tensorParallelSize, int dataParallelSize, DataStrategy dataStrategy) {
        super(wrappedOptimizer, config, s -> {
            s.setStrategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_HYBRID);
            s.setPipeline_parallel_size(pipelineParallelSize);
            s.setTensor_parallel_size(tensorParallelSize);
            s.setData_parallel_size(dataParallelSize);
            if (dataStrategy != null) s.setHybrid_data_strategy(dataStrategy.ordinal());
        });
        this.pipelineParallelSize = pipelineParallelSize;
        this.tensorParallelSize = tensorParallelSize;
        this.dataParallelSize = dataParallelSize;
    }
    public int getPipelineParallelSize() { return pipelineParallelSize; }
    public int getTensorParallelSize() { return tensorParallelSize; }
    public int getDataParallelSize() { return dataParallelSize; }
}
