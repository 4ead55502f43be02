package org.shardopt;

/** How gradients are compressed on the wire (shardopt_compression, in its order): BF16/FP16 2 bytes per element;
 *  INT8/INT4 blockwise, a scale per block; TOP_K the CompressionRatio largest of each chunk; POWER_SGD a rank-PowerSgdRank
 *  approximation of every tensor declared with {@link ParameterLayout#addMatrix}. */
public enum GradientCompression { NONE, BF16, FP16, INT8, INT4, TOP_K, POWER_SGD }
