package org.shardopt;

import org.shardopt.internal.shardopt_reduce_op;

/** Reduction of a collective (AiDotNet's ReductionOperation). */
public enum ReductionOperation {
    SUM(shardopt_reduce_op.SHARDOPT_SUM), PRODUCT(shardopt_reduce_op.SHARDOPT_PROD),
    MIN(shardopt_reduce_op.SHARDOPT_MIN), MAX(shardopt_reduce_op.SHARDOPT_MAX),
    AVERAGE(shardopt_reduce_op.SHARDOPT_AVG);

    final int code;

    ReductionOperation(int code) { this.code = code; }
}
