package org.shardopt;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.shardopt.internal.shardopt_training_options;
import static org.shardopt.internal.shardopt_lr_schedule.*;

/** One of the library's learning-rate schedules (shardopt_lr_schedule): the rate of each epoch (perStep(): of each step)
 *  t from the base rate the optimizer has when optimize starts. A parameter not given keeps the library's default:
 *  {@code cosine().minLearningRate(0.01)}, {@code warmupStepDecay(2).decayPeriod(3).gamma(0.3)}, {@code warmup(5).perStep()},
 *  {@code custom((t, base) -> base / (1 + t / 2.0))}. */
public final class LearningRateSchedule {
    /** A custom rule: the rate (finite, >= 0) for t (an epoch or a step, from 0) given the base rate. */
    @FunctionalInterface
    public interface Rule { double rate(long t, double base); }
    private final List<Consumer<shardopt_training_options>> fields = new ArrayList<>();
    private final int kind;
    final Rule rule;
    private LearningRateSchedule(int kind, Rule rule) { this.kind = kind; this.rule = rule; }
    private LearningRateSchedule with(Consumer<shardopt_training_options> field) { fields.add(field); return this; }
    public static LearningRateSchedule constant() { return new LearningRateSchedule(SHARDOPT_LR_CONSTANT, null); }
    /** base (t + 1) / warmup while t &lt; warmup, then base. */
    public static LearningRateSchedule warmup(long warmup) { return new LearningRateSchedule(SHARDOPT_LR_WARMUP, null).with(t -> t.setWarmup(warmup)); }
    /** torch's CosineAnnealingLR to minLearningRate over decayPeriod (default: to the end of training). */
    public static LearningRateSchedule cosine() { return new LearningRateSchedule(SHARDOPT_LR_COSINE, null); }
    /** torch's StepLR: base gamma^floor(t / decayPeriod). */
    public static LearningRateSchedule stepDecay() { return new LearningRateSchedule(SHARDOPT_LR_STEP_DECAY, null); }
    public static LearningRateSchedule warmupCosine(long warmup) { return new LearningRateSchedule(SHARDOPT_LR_WARMUP_COSINE, null).with(t -> t.setWarmup(warmup)); }
    public static LearningRateSchedule warmupStepDecay(long warmup) { return new LearningRateSchedule(SHARDOPT_LR_WARMUP_STEP_DECAY, null).with(t -> t.setWarmup(warmup)); }
    public static LearningRateSchedule custom(Rule rule) { return new LearningRateSchedule(SHARDOPT_LR_CUSTOM, java.util.Objects.requireNonNull(rule, "rule")); }
    public LearningRateSchedule decayPeriod(long v) { return with(t -> t.setDecay_period(v)); }
    public LearningRateSchedule minLearningRate(double v) { return with(t -> t.setMin_lr(v)); }
    public LearningRateSchedule gamma(double v) { return with(t -> t.setGamma(v)); }
    /** t counts optimizer steps instead of epochs. */
    public LearningRateSchedule perStep() { return with(t -> t.setLr_per_step(1)); }
    void applyTo(shardopt_training_options t) {
        fields.forEach(f -> f.accept(t));
        t.setLr_schedule(kind);
    }
}
