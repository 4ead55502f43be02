package org.shardopt;

/** Bytes one rank holds now, in its memory space ({@link ShardedOptimizer#getMemoryStats()}). */
public final class MemoryStats {
    public final long paramsBytes, gradsBytes, optimizerStateBytes, bufferBytes, peakBufferBytes, totalBytes;
    /** Gradient compression: error-feedback residuals, PowerSGD's Q matrices, payload buffers. */
    public final long compressionBytes;
    /** ZeRO-Offload's host memory beside the fields above (0 in host memory, where those are host memory). */
    public final long hostParamsBytes, hostGradsBytes, hostOptimizerStateBytes, hostTotalBytes;

    MemoryStats(long paramsBytes, long gradsBytes, long optimizerStateBytes, long bufferBytes, long peakBufferBytes,
                long totalBytes, long compressionBytes, long hostParamsBytes, long hostGradsBytes,
                long hostOptimizerStateBytes, long hostTotalBytes) {
        this.paramsBytes = paramsBytes;
        this.gradsBytes = gradsBytes;
        this.optimizerStateBytes = optimizerStateBytes;
        this.bufferBytes = bufferBytes;
        this.peakBufferBytes = peakBufferBytes;
        this.totalBytes = totalBytes;
        this.compressionBytes = compressionBytes;
        this.hostParamsBytes = hostParamsBytes;
        this.hostGradsBytes = hostGradsBytes;
        this.hostOptimizerStateBytes = hostOptimizerStateBytes;
        this.hostTotalBytes = hostTotalBytes;
    }
}
