package org.shardopt;

/** Bytes one rank holds now, in its memory space; compressionBytes: gradient compression's buffers; host*: ZeRO-Offload's
 *  host memory (0 in host memory). */
public final class MemoryStats {
    public final long paramsBytes, gradsBytes, optimizerStateBytes, bufferBytes, peakBufferBytes, totalBytes, compressionBytes;
    public final long hostParamsBytes, hostGradsBytes, hostOptimizerStateBytes, hostTotalBytes;
    MemoryStats(org.shardopt.internal.shardopt_memory_stats m) {
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
