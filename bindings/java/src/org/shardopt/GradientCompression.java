package org.shardopt;

import org.shardopt.internal.shardopt_compression;

/**
 * How gradients are compressed on the wire ({@link ShardingConfiguration#setGradientCompression}).
 * BF16/FP16: 2 bytes per element. INT8/INT4: blockwise, a scale per 256 elements. TOP_K: the
 * CompressionRatio largest-magnitude elements of each chunk. POWER_SGD: a rank-PowerSgdRank approximation of
 * every tensor declared as a matrix ({@link ParameterLayout#addMatrix}); other tensors go uncompressed. Error
 * feedback (the default) keeps what INT8, INT4, TOP_K and POWER_SGD missed and adds it to the next step.
 */
public enum GradientCompression {
    NONE(shardopt_compression.SHARDOPT_COMPRESSION_NONE), BF16(shardopt_compression.SHARDOPT_COMPRESSION_BF16),
    FP16(shardopt_compression.SHARDOPT_COMPRESSION_FP16), INT8(shardopt_compression.SHARDOPT_COMPRESSION_INT8),
    INT4(shardopt_compression.SHARDOPT_COMPRESSION_INT4), TOP_K(shardopt_compression.SHARDOPT_COMPRESSION_TOP_K),
    POWER_SGD(shardopt_compression.SHARDOPT_COMPRESSION_POWER_SGD);

    final int code;

    GradientCompression(int code) { this.code = code; }
}
