package org.shardopt;

import java.nio.FloatBuffer;
import java.nio.LongBuffer;

/** The model given to optimize() for float32 parameters: the mean loss over the sample indices at params,
 * with the mean gradient written into grad (zeroed on entry). The buffers view the library's memory and are
 * valid during the call only. */
@FunctionalInterface
public interface GradientModel {
    double evaluate(FloatBuffer params, FloatBuffer grad, LongBuffer samples);
}
