package org.shardopt;

import org.shardopt.internal.shardopt_memory_stats;

/** Bytes one rank holds now, in its memory space ({@link ShardedOptimizer#getMemoryStats()}). */
public final class MemoryStats {
    public final long paramsBytes, gradsBytes, optimizerStateBytes, bufferBytes, peakBufferBytes, totalBytes;
    /** Gradient compression: error-feedback residuals, PowerSGD's Q matrices, payload buffers. */
    public final long compressionBytes;
    /** ZeRO-Offload's host memory beside the fields above (0 in host memory, where those are host memory). */
    public final long hostParamsBytes, hostGradsBytes, hostOptimizerStateBytes, hostTotalBytes;

    MemoryStats(shardopt_memory_stats m) {
        paramsBytes = m.getParams_bytes();
        gradsBytes = m.getGrads_bytes();
        optimizerStateBytes = m.getOptimizer_state_bytes();
        bufferBytes = m.getBuffer_bytes();
        peakBufferBytes = m.getPeak_buffer_bytes();
        totalBytes = m.getTotal_bytes();
        compressionBytes = m.getCompression_bytes();
        hostParamsBytes = m.getHost_params_bytes();
        hostGradsBytes = m.getHost_grads_bytes();
        hostOptimizerStateBytes = m.getHost_optimizer_state_bytes();
        hostTotalBytes = m.getHost_total_bytes();
    }
}
