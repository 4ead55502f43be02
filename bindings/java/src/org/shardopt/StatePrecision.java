package org.shardopt;

/** How Adam, AdamW and SGD with momentum keep their state (the C ABI's shardopt_state_precision, in its order): FULL, or
 *  blockwise quantized BITS8 / BITS4 (docs/optimizers.md; not with AMSGrad). */
public enum StatePrecision { FULL, BITS8, BITS4 }
