package org.shardopt;

/** The model in optimize's lower-level form (over sample indices): the mean loss over samples of dataset at params, and
 *  the mean gradient into grad (zeroed on entry) unless it is null (only the loss: validation, test, the best solution's
 *  scores). The views are the library's memory, valid during the call only. */
@FunctionalInterface
public interface GradientModel {
    double evaluate(NativeView params, NativeView grad, long[] samples, Dataset dataset);
}
