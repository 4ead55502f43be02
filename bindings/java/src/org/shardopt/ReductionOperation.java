package org.shardopt;

/** Reduction of a collective (AiDotNet's ReductionOperation); code: shardopt_reduce_op. */
public enum ReductionOperation {
    SUM(0), PRODUCT(4), MIN(2), MAX(3), AVERAGE(1);
    final int code;
    ReductionOperation(int code) { this.code = code; }
}
