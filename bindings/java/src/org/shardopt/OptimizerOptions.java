package org.shardopt;

import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.shardopt_optimizer_options;
import org.shardopt.internal.shardopt_training_options;

/**
 * A base optimizer's options with AiDotNet's names: its update rule's (shardopt_optimizer_options, filled from the
 * library's preset for the optimizer class) and the training loop's (AiDotNet's OptimizationAlgorithmOptions:
 * shardopt_training_options, from shardopt_training_options_init). The defaults are the library's; a setter refuses a bad
 * value at once with the library's message (IllegalArgumentException) and keeps the old one. The update rule's options
 * are taken when the sharded optimizer is created; the training options at each optimize.
 */
public class OptimizerOptions<T, TInput, TOutput> {
    static { NativeLoader.load(); }
    final shardopt_optimizer_options rule = new shardopt_optimizer_options();
    final shardopt_training_options training = new shardopt_training_options();
    private LearningRateSchedule schedule;
    OptimizerOptions(int preset) {
        shardopt_native.shardopt_optimizer_options_init_preset(rule, preset);
        shardopt_native.shardopt_training_options_init(training);
    }
    // ---- the update rule ----
    public double getInitialLearningRate() { return rule.getLr(); } public void setInitialLearningRate(double v) { rule.setLr(v); }
    /** {@link #getInitialLearningRate()}. */
    public double getLearningRate() { return rule.getLr(); } public void setLearningRate(double v) { rule.setLr(v); }
    public double getWeightDecay() { return rule.getWeight_decay(); } public void setWeightDecay(double v) { rule.setWeight_decay(v); }
    public boolean getMaximize() { return rule.getMaximize() != 0; } public void setMaximize(boolean v) { rule.setMaximize(v ? 1 : 0); }
    public double getMomentum() { return rule.getMomentum(); } public void setMomentum(double v) { rule.setMomentum(v); }
    public double getDampening() { return rule.getDampening(); } public void setDampening(double v) { rule.setDampening(v); }
    public boolean getNesterov() { return rule.getNesterov() != 0; } public void setNesterov(boolean v) { rule.setNesterov(v ? 1 : 0); }
    public double getBeta1() { return rule.getBeta1(); } public void setBeta1(double v) { rule.setBeta1(v); }
    public double getBeta2() { return rule.getBeta2(); } public void setBeta2(double v) { rule.setBeta2(v); }
    public double getEpsilon() { return rule.getEps(); } public void setEpsilon(double v) { rule.setEps(v); }
    public boolean getAMSGrad() { return rule.getAmsgrad() != 0; } public void setAMSGrad(boolean v) { rule.setAmsgrad(v ? 1 : 0); }
    /** RMSprop's decay (torch's alpha). */
    public double getDecay() { return rule.getAlpha(); } public void setDecay(double v) { rule.setAlpha(v); }
    public boolean getCentered() { return rule.getCentered() != 0; } public void setCentered(boolean v) { rule.setCentered(v ? 1 : 0); }
    public double getLearningRateDecay() { return rule.getLr_decay(); } public void setLearningRateDecay(double v) { rule.setLr_decay(v); }
    public double getInitialAccumulatorValue() { return rule.getInitial_accumulator_value(); }
    public void setInitialAccumulatorValue(double v) { rule.setInitial_accumulator_value(v); }
    /** Adam, AdamW, SGD with momentum: full or low-bit state (the library checks the rule takes it). */
    public StatePrecision getStatePrecision() { return StatePrecision.values()[rule.getState_precision()]; }
    public void setStatePrecision(StatePrecision v) { rule.setState_precision(java.util.Objects.requireNonNull(v, "statePrecision").ordinal()); }
    /** NAdam's momentum decay (psi), and its AdamW-style weight decay instead of L2. */
    public double getMomentumDecay() { return rule.getMomentum_decay(); } public void setMomentumDecay(double v) { rule.setMomentum_decay(v); }
    public boolean getDecoupledWeightDecay() { return rule.getDecoupled_weight_decay() != 0; }
    public void setDecoupledWeightDecay(boolean v) { rule.setDecoupled_weight_decay(v ? 1 : 0); }
    /** Adadelta's decay of its running averages. */
    public double getRho() { return rule.getRho(); } public void setRho(double v) { rule.setRho(v); }
    /** Adafactor: the second moment's decay rate is t^Beta2Decay; Epsilon2 is its eps2 (Epsilon its eps1, 0: the element
     *  type's machine epsilon); ClipThreshold the update's RMS clipping threshold (torch's d). */
    public double getBeta2Decay() { return rule.getBeta2_decay(); } public void setBeta2Decay(double v) { rule.setBeta2_decay(v); }
    public double getEpsilon2() { return rule.getEps2(); } public void setEpsilon2(double v) { rule.setEps2(v); }
    public double getClipThreshold() { return rule.getClip_threshold(); } public void setClipThreshold(double v) { rule.setClip_threshold(v); }
    /** Muon on matrices: Newton-Schulz iterations and the quintic's coefficients a, b, c; the learning-rate adjustment;
     *  AdamW's learning rate, weight decay and epsilon on every other tensor. */
    public int getNewtonSchulzSteps() { return rule.getNs_steps(); } public void setNewtonSchulzSteps(int v) { rule.setNs_steps(v); }
    public double getNewtonSchulzA() { return rule.getNs_a(); } public void setNewtonSchulzA(double v) { rule.setNs_a(v); }
    public double getNewtonSchulzB() { return rule.getNs_b(); } public void setNewtonSchulzB(double v) { rule.setNs_b(v); }
    public double getNewtonSchulzC() { return rule.getNs_c(); } public void setNewtonSchulzC(double v) { rule.setNs_c(v); }
    public MuonLearningRateAdjustment getLearningRateAdjustment() { return MuonLearningRateAdjustment.values()[rule.getAdjust_lr()]; }
    public void setLearningRateAdjustment(MuonLearningRateAdjustment v) {
        rule.setAdjust_lr(java.util.Objects.requireNonNull(v, "learningRateAdjustment").ordinal());
    }
    public double getAdamWLearningRate() { return rule.getAdamw_lr(); } public void setAdamWLearningRate(double v) { rule.setAdamw_lr(v); }
    public double getAdamWWeightDecay() { return rule.getAdamw_weight_decay(); } public void setAdamWWeightDecay(double v) { rule.setAdamw_weight_decay(v); }
    public double getAdamWEpsilon() { return rule.getAdamw_eps(); } public void setAdamWEpsilon(double v) { rule.setAdamw_eps(v); }
    // ---- the training loop: an epoch is a pass over the training set, a step one optimizer step ----
    /** Epochs (AiDotNet's MaxIterations). */
    public int getMaxIterations() { return training.getMax_epochs(); } public void setMaxIterations(int v) { training.setMax_epochs(v); }
    /** Samples per step over all ranks; 0: the whole training set. */
    public long getBatchSize() { return training.getBatch_size(); } public void setBatchSize(long v) { training.setBatch_size(v); }
    /** Steps over all epochs; 0: no limit. */
    public long getMaxSteps() { return training.getMax_steps(); } public void setMaxSteps(long v) { training.setMax_steps(v); }
    /** A fresh order of the training samples each epoch, from RandomSeed and the epoch, the same on every rank. */
    public boolean getShuffleData() { return training.getShuffle() != 0; } public void setShuffleData(boolean v) { training.setShuffle(v ? 1 : 0); }
    public long getRandomSeed() { return training.getSeed(); } public void setRandomSeed(long v) { training.setSeed(v); }
    /** Stop once EarlyStoppingPatience epochs in a row have not lowered the score (validation loss, else training loss)
     *  by more than Tolerance; the vote is across ranks. */
    public boolean getUseEarlyStopping() { return training.getEarly_stopping() != 0; }
    public void setUseEarlyStopping(boolean v) { training.setEarly_stopping(v ? 1 : 0); }
    public int getEarlyStoppingPatience() { return training.getPatience(); } public void setEarlyStoppingPatience(int v) { training.setPatience(v); }
    public double getTolerance() { return training.getTolerance(); } public void setTolerance(double v) { training.setTolerance(v); }
    /** The model on the GPU (device_batches): with an optimizer in CUDA memory, optimize hands the model device views of
     *  its memory (NativeView.isDevice, getDeviceAddress) instead of host copies, valid during the call; refused
     *  for an optimizer in host memory and for the wrapped optimizer's model (IGradientModel reads host memory). */
    public boolean getDeviceBatches() { return training.getDevice_batches() != 0; }
    public void setDeviceBatches(boolean v) { training.setDevice_batches(v ? 1 : 0); }
    /** The learning-rate schedule (null: constant); checked against these options at once. */
    public LearningRateSchedule getLearningRateSchedule() { return schedule; }
    public void setLearningRateSchedule(LearningRateSchedule v) { run(v).delete(); schedule = v; }
    /** The training options of one run: these, with schedule s. */
    shardopt_training_options run(LearningRateSchedule s) {
        shardopt_training_options t = new shardopt_training_options(training);
        if (s != null) s.applyTo(t);
        return t;
    }
}
