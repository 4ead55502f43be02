package org.shardopt;

import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.shardopt_optimizer_kind;
import org.shardopt.internal.shardopt_optimizer_options;

/** Options of a base optimizer; defaults are the library's (torch.optim's) for the optimizer's kind. */
public class OptimizerOptions {
    static { NativeLoader.load(); }

    final shardopt_optimizer_options nat = new shardopt_optimizer_options();

    protected OptimizerOptions(int kind) { shardopt_native.so_optimizer_options_defaults(nat, kind); }

    public double getLearningRate() { return nat.getLr(); }
    public void setLearningRate(double v) { nat.setLr(v); }
    public double getWeightDecay() { return nat.getWeight_decay(); }
    public void setWeightDecay(double v) { nat.setWeight_decay(v); }
    public boolean getMaximize() { return nat.getMaximize() != 0; }
    public void setMaximize(boolean v) { nat.setMaximize(v ? 1 : 0); }
    public double getMomentum() { return nat.getMomentum(); }
    public void setMomentum(double v) { nat.setMomentum(v); }
    public double getDampening() { return nat.getDampening(); }
    public void setDampening(double v) { nat.setDampening(v); }
    public boolean getNesterov() { return nat.getNesterov() != 0; }
    public void setNesterov(boolean v) { nat.setNesterov(v ? 1 : 0); }
    public double getBeta1() { return nat.getBeta1(); }
    public void setBeta1(double v) { nat.setBeta1(v); }
    public double getBeta2() { return nat.getBeta2(); }
    public void setBeta2(double v) { nat.setBeta2(v); }
    public double getEpsilon() { return nat.getEps(); }
    public void setEpsilon(double v) { nat.setEps(v); }
    public boolean getAMSGrad() { return nat.getAmsgrad() != 0; }
    public void setAMSGrad(boolean v) { nat.setAmsgrad(v ? 1 : 0); }
    /** RMSprop's smoothing constant (torch's alpha). */
    public double getDecay() { return nat.getAlpha(); }
    public void setDecay(double v) { nat.setAlpha(v); }
    public boolean getCentered() { return nat.getCentered() != 0; }
    public void setCentered(boolean v) { nat.setCentered(v ? 1 : 0); }
    public double getLearningRateDecay() { return nat.getLr_decay(); }
    public void setLearningRateDecay(double v) { nat.setLr_decay(v); }
    public double getInitialAccumulatorValue() { return nat.getInitial_accumulator_value(); }
    public void setInitialAccumulatorValue(double v) { nat.setInitial_accumulator_value(v); }

    // ---- the training loop's options (AiDotNet's OptimizationAlgorithmOptions); the layer's, not the C ABI's ----
    private int maxIterations = 100;
    private long batchSize = 32;
    private boolean shuffleData;
    private long seed;
    private boolean useEarlyStopping;
    private int earlyStoppingPatience = 10;
    private double tolerance = 1e-6;
    private LearningRateSchedule schedule;

    /** Epochs optimize(OptimizationInputData) runs (AiDotNet's MaxIterations; 100). */
    public int getMaxIterations() { return maxIterations; }
    public void setMaxIterations(int v) {
        if (v < 1) throw new IllegalArgumentException("MaxIterations must be >= 1 (got " + v + ")");
        maxIterations = v;
    }
    /** Global batch per step (32); 0 = the whole training set. */
    public long getBatchSize() { return batchSize; }
    public void setBatchSize(long v) {
        if (v < 0) throw new IllegalArgumentException("BatchSize must be >= 0 (got " + v + ")");
        batchSize = v;
    }
    /** Shuffle the training samples every epoch (false), the same permutation on every rank. */
    public boolean getShuffleData() { return shuffleData; }
    public void setShuffleData(boolean v) { shuffleData = v; }
    public long getSeed() { return seed; }
    public void setSeed(long v) { seed = v; }
    /** Stop when the validation (else training) loss has not improved by Tolerance for EarlyStoppingPatience epochs. */
    public boolean getUseEarlyStopping() { return useEarlyStopping; }
    public void setUseEarlyStopping(boolean v) { useEarlyStopping = v; }
    public int getEarlyStoppingPatience() { return earlyStoppingPatience; }
    public void setEarlyStoppingPatience(int v) {
        if (v < 1) throw new IllegalArgumentException("EarlyStoppingPatience must be >= 1 (got " + v + ")");
        earlyStoppingPatience = v;
    }
    public double getTolerance() { return tolerance; }
    public void setTolerance(double v) {
        if (!(v >= 0)) throw new IllegalArgumentException("Tolerance must be >= 0 (got " + v + ")");
        tolerance = v;
    }
    /** The learning-rate schedule optimize applies per epoch (null: constant). */
    public LearningRateSchedule getLearningRateSchedule() { return schedule; }
    public void setLearningRateSchedule(LearningRateSchedule v) { schedule = v; }

    shardopt_optimizer_options copy() {
        shardopt_optimizer_options c = new shardopt_optimizer_options();
        shardopt_native.so_optimizer_options_defaults(c, nat.getKind());
        c.setLr(nat.getLr()); c.setWeight_decay(nat.getWeight_decay()); c.setMaximize(nat.getMaximize());
        c.setMomentum(nat.getMomentum()); c.setDampening(nat.getDampening()); c.setNesterov(nat.getNesterov());
        c.setBeta1(nat.getBeta1()); c.setBeta2(nat.getBeta2()); c.setEps(nat.getEps()); c.setAmsgrad(nat.getAmsgrad());
        c.setAlpha(nat.getAlpha()); c.setCentered(nat.getCentered()); c.setLr_decay(nat.getLr_decay());
        c.setInitial_accumulator_value(nat.getInitial_accumulator_value());
        return c;
    }

    static final int SGD = shardopt_optimizer_kind.SHARDOPT_SGD, ADAM = shardopt_optimizer_kind.SHARDOPT_ADAM,
        ADAMW = shardopt_optimizer_kind.SHARDOPT_ADAMW, RMSPROP = shardopt_optimizer_kind.SHARDOPT_RMSPROP,
        ADAGRAD = shardopt_optimizer_kind.SHARDOPT_ADAGRAD, LAMB = shardopt_optimizer_kind.SHARDOPT_LAMB;
}
