package org.shardopt;

import java.nio.DoubleBuffer;
import java.nio.LongBuffer;

/** {@link GradientModel} for float64 parameters. */
@FunctionalInterface
public interface DoubleGradientModel {
    double evaluate(DoubleBuffer params, DoubleBuffer grad, LongBuffer samples);
}
