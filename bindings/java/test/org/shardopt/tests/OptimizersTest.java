package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;
import org.junit.jupiter.api.Test;
import org.shardopt.*;
import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.shardopt_optimizer_kind;
import org.shardopt.internal.shardopt_optimizer_options;
import org.shardopt.internal.shardopt_optimizer_preset;
import org.shardopt.samples.MlpDemo;

/** Issue 37: LionOptimizer, AdafactorOptimizer, NadamOptimizer, AdaMaxOptimizer, AdaDeltaOptimizer and MuonOptimizer. Their
 *  options are the library's presets (torch.optim's defaults), read back through the options; the new settings round-trip
 *  to their C fields; a bad value is the library's IllegalArgumentException naming the field, and the old value stays;
 *  Lion, NAdam, AdaMax and AdaDelta train the demo MLP through a sharded optimizer. */
@SuppressWarnings({"rawtypes", "unchecked"})
class OptimizersTest {
    /** Every setting of the options over shardopt_optimizer_options: its getter, and the C field's. */
    static final Map<String, Object[]> FIELDS = new LinkedHashMap<>();
    static void field(String name, ToDoubleFunction<OptimizerOptions> get, ToDoubleFunction<shardopt_optimizer_options> c) {
        FIELDS.put(name, new Object[] {get, c});
    }
    static {
        field("LearningRate", OptimizerOptions::getLearningRate, shardopt_optimizer_options::getLr);
        field("WeightDecay", OptimizerOptions::getWeightDecay, shardopt_optimizer_options::getWeight_decay);
        field("Maximize", o -> o.getMaximize() ? 1 : 0, shardopt_optimizer_options::getMaximize);
        field("Momentum", OptimizerOptions::getMomentum, shardopt_optimizer_options::getMomentum);
        field("Dampening", OptimizerOptions::getDampening, shardopt_optimizer_options::getDampening);
        field("Nesterov", o -> o.getNesterov() ? 1 : 0, shardopt_optimizer_options::getNesterov);
        field("Beta1", OptimizerOptions::getBeta1, shardopt_optimizer_options::getBeta1);
        field("Beta2", OptimizerOptions::getBeta2, shardopt_optimizer_options::getBeta2);
        field("Epsilon", OptimizerOptions::getEpsilon, shardopt_optimizer_options::getEps);
        field("AMSGrad", o -> o.getAMSGrad() ? 1 : 0, shardopt_optimizer_options::getAmsgrad);
        field("Decay", OptimizerOptions::getDecay, shardopt_optimizer_options::getAlpha);
        field("Centered", o -> o.getCentered() ? 1 : 0, shardopt_optimizer_options::getCentered);
        field("LearningRateDecay", OptimizerOptions::getLearningRateDecay, shardopt_optimizer_options::getLr_decay);
        field("InitialAccumulatorValue", OptimizerOptions::getInitialAccumulatorValue, shardopt_optimizer_options::getInitial_accumulator_value);
        field("StatePrecision", o -> o.getStatePrecision().ordinal(), shardopt_optimizer_options::getState_precision);
        field("MomentumDecay", OptimizerOptions::getMomentumDecay, shardopt_optimizer_options::getMomentum_decay);
        field("DecoupledWeightDecay", o -> o.getDecoupledWeightDecay() ? 1 : 0, shardopt_optimizer_options::getDecoupled_weight_decay);
        field("Rho", OptimizerOptions::getRho, shardopt_optimizer_options::getRho);
        field("Beta2Decay", OptimizerOptions::getBeta2Decay, shardopt_optimizer_options::getBeta2_decay);
        field("Epsilon2", OptimizerOptions::getEpsilon2, shardopt_optimizer_options::getEps2);
        field("ClipThreshold", OptimizerOptions::getClipThreshold, shardopt_optimizer_options::getClip_threshold);
        field("NewtonSchulzSteps", OptimizerOptions::getNewtonSchulzSteps, shardopt_optimizer_options::getNs_steps);
        field("NewtonSchulzA", OptimizerOptions::getNewtonSchulzA, shardopt_optimizer_options::getNs_a);
        field("NewtonSchulzB", OptimizerOptions::getNewtonSchulzB, shardopt_optimizer_options::getNs_b);
        field("NewtonSchulzC", OptimizerOptions::getNewtonSchulzC, shardopt_optimizer_options::getNs_c);
        field("LearningRateAdjustment", o -> o.getLearningRateAdjustment().ordinal(), shardopt_optimizer_options::getAdjust_lr);
        field("AdamWLearningRate", OptimizerOptions::getAdamWLearningRate, shardopt_optimizer_options::getAdamw_lr);
        field("AdamWWeightDecay", OptimizerOptions::getAdamWWeightDecay, shardopt_optimizer_options::getAdamw_weight_decay);
        field("AdamWEpsilon", OptimizerOptions::getAdamWEpsilon, shardopt_optimizer_options::getAdamw_eps);
    }
    static double get(String setting, OptimizerOptions o) { return ((ToDoubleFunction<OptimizerOptions>) FIELDS.get(setting)[0]).applyAsDouble(o); }

    @Test
    void optionsAreTheLibrarysPresets() {
        Object[][] classes = {
            {"Lion", shardopt_optimizer_preset.SHARDOPT_PRESET_LION, shardopt_optimizer_kind.SHARDOPT_LION,
             (Supplier<OptimizerOptions>) LionOptimizerOptions::new, (Supplier<Optimizer>) LionOptimizer::new},
            {"Adafactor", shardopt_optimizer_preset.SHARDOPT_PRESET_ADAFACTOR, shardopt_optimizer_kind.SHARDOPT_ADAFACTOR,
             (Supplier<OptimizerOptions>) AdafactorOptimizerOptions::new, (Supplier<Optimizer>) AdafactorOptimizer::new},
            {"Nadam", shardopt_optimizer_preset.SHARDOPT_PRESET_NADAM, shardopt_optimizer_kind.SHARDOPT_NADAM,
             (Supplier<OptimizerOptions>) NadamOptimizerOptions::new, (Supplier<Optimizer>) NadamOptimizer::new},
            {"AdaMax", shardopt_optimizer_preset.SHARDOPT_PRESET_ADAMAX, shardopt_optimizer_kind.SHARDOPT_ADAMAX,
             (Supplier<OptimizerOptions>) AdaMaxOptimizerOptions::new, (Supplier<Optimizer>) AdaMaxOptimizer::new},
            {"AdaDelta", shardopt_optimizer_preset.SHARDOPT_PRESET_ADADELTA, shardopt_optimizer_kind.SHARDOPT_ADADELTA,
             (Supplier<OptimizerOptions>) AdaDeltaOptimizerOptions::new, (Supplier<Optimizer>) AdaDeltaOptimizer::new},
            {"Muon", shardopt_optimizer_preset.SHARDOPT_PRESET_MUON, shardopt_optimizer_kind.SHARDOPT_MUON,
             (Supplier<OptimizerOptions>) MuonOptimizerOptions::new, (Supplier<Optimizer>) MuonOptimizer::new}};
        for (Object[] k : classes) {
            String name = (String) k[0];
            Optimizer made = ((Supplier<Optimizer>) k[4]).get(); // loads the library
            OptimizerOptions fresh = ((Supplier<OptimizerOptions>) k[3]).get();
            assertEquals(name + "Optimizer", made.getClass().getSimpleName());
            assertEquals(name + "OptimizerOptions", made.getOptions().getClass().getSimpleName());
            assertEquals(name + "OptimizerOptions", fresh.getClass().getSimpleName());
            shardopt_optimizer_options ref = new shardopt_optimizer_options();
            shardopt_native.shardopt_optimizer_options_init_preset(ref, (int) k[1]);
            assertEquals((int) k[2], ref.getKind(), name + ": the preset's kind");
            for (OptimizerOptions o : new OptimizerOptions[] {fresh, made.getOptions()})
                for (Map.Entry<String, Object[]> f : FIELDS.entrySet())
                    assertEquals(((ToDoubleFunction<shardopt_optimizer_options>) f.getValue()[1]).applyAsDouble(ref), get(f.getKey(), o),
                                 0.0, name + ": " + f.getKey());
            ref.delete();
        }
        // torch.optim's defaults, as the presets give them
        LionOptimizerOptions lion = new LionOptimizerOptions();
        assertArrayEquals(new double[] {1e-4, 0.9, 0.99, 0}, new double[] {lion.getLearningRate(), lion.getBeta1(), lion.getBeta2(), lion.getWeightDecay()});
        AdafactorOptimizerOptions f = new AdafactorOptimizerOptions();
        assertArrayEquals(new double[] {1e-2, -0.8, 0, 1e-3, 1},
                          new double[] {f.getLearningRate(), f.getBeta2Decay(), f.getEpsilon(), f.getEpsilon2(), f.getClipThreshold()});
        NadamOptimizerOptions na = new NadamOptimizerOptions();
        assertArrayEquals(new double[] {2e-3, 0.9, 0.999, 1e-8, 4e-3},
                          new double[] {na.getLearningRate(), na.getBeta1(), na.getBeta2(), na.getEpsilon(), na.getMomentumDecay()});
        assertFalse(na.getDecoupledWeightDecay());
        AdaMaxOptimizerOptions mx = new AdaMaxOptimizerOptions();
        assertArrayEquals(new double[] {2e-3, 0.9, 0.999, 1e-8}, new double[] {mx.getLearningRate(), mx.getBeta1(), mx.getBeta2(), mx.getEpsilon()});
        AdaDeltaOptimizerOptions d = new AdaDeltaOptimizerOptions();
        assertArrayEquals(new double[] {1, 0.9, 1e-6}, new double[] {d.getLearningRate(), d.getRho(), d.getEpsilon()});
        MuonOptimizerOptions m = new MuonOptimizerOptions();
        assertArrayEquals(new double[] {1e-3, 0.95, 0.1, 5, 3.4445, -4.7750, 2.0315, 1e-3, 1e-2, 1e-8},
                          new double[] {m.getLearningRate(), m.getMomentum(), m.getWeightDecay(), m.getNewtonSchulzSteps(), m.getNewtonSchulzA(),
                                        m.getNewtonSchulzB(), m.getNewtonSchulzC(), m.getAdamWLearningRate(), m.getAdamWWeightDecay(), m.getAdamWEpsilon()});
        assertTrue(m.getNesterov());
        assertEquals(MuonLearningRateAdjustment.ORIGINAL, m.getLearningRateAdjustment());
        for (OptimizerOptions o : new OptimizerOptions[] {lion, f, na, mx, d, m, new AdamOptimizerOptions()})
            assertEquals(StatePrecision.FULL, o.getStatePrecision());
    }

    @Test
    void settingsRoundTrip() {
        NadamOptimizerOptions na = new NadamOptimizerOptions();
        na.setMomentumDecay(5e-3);
        na.setDecoupledWeightDecay(true);
        na.setWeightDecay(0.01);
        assertEquals(5e-3, na.getMomentumDecay(), 0.0);
        assertTrue(na.getDecoupledWeightDecay());
        AdaDeltaOptimizerOptions d = new AdaDeltaOptimizerOptions();
        d.setRho(0.95);
        assertEquals(0.95, d.getRho(), 0.0);
        AdafactorOptimizerOptions f = new AdafactorOptimizerOptions();
        f.setBeta2Decay(-0.5);
        f.setEpsilon2(2e-3);
        f.setClipThreshold(1.5);
        f.setEpsilon(1e-30);
        assertArrayEquals(new double[] {-0.5, 2e-3, 1.5, 1e-30}, new double[] {f.getBeta2Decay(), f.getEpsilon2(), f.getClipThreshold(), f.getEpsilon()});
        MuonOptimizerOptions m = new MuonOptimizerOptions();
        m.setNewtonSchulzSteps(3);
        m.setNewtonSchulzA(2);
        m.setNewtonSchulzB(-1.5);
        m.setNewtonSchulzC(0.5);
        m.setAdamWLearningRate(3e-4);
        m.setAdamWWeightDecay(0);
        m.setAdamWEpsilon(1e-6);
        m.setNesterov(false);
        assertArrayEquals(new double[] {3, 2, -1.5, 0.5, 3e-4, 0, 1e-6},
                          new double[] {m.getNewtonSchulzSteps(), m.getNewtonSchulzA(), m.getNewtonSchulzB(), m.getNewtonSchulzC(),
                                        m.getAdamWLearningRate(), m.getAdamWWeightDecay(), m.getAdamWEpsilon()});
        assertFalse(m.getNesterov());
        for (MuonLearningRateAdjustment a : MuonLearningRateAdjustment.values()) {
            m.setLearningRateAdjustment(a);
            assertEquals(a, m.getLearningRateAdjustment());
        }
        assertThrows(NullPointerException.class, () -> m.setLearningRateAdjustment(null));
        AdamOptimizerOptions adam = new AdamOptimizerOptions();
        for (StatePrecision p : new StatePrecision[] {StatePrecision.BITS8, StatePrecision.BITS4, StatePrecision.FULL}) {
            adam.setStatePrecision(p);
            assertEquals(p, adam.getStatePrecision());
        }
        assertThrows(NullPointerException.class, () -> adam.setStatePrecision(null));
        MomentumOptimizerOptions momentum = new MomentumOptimizerOptions();
        momentum.setStatePrecision(StatePrecision.BITS4);
        assertEquals(StatePrecision.BITS4, momentum.getStatePrecision());
        LionOptimizerOptions lion = new LionOptimizerOptions();
        lion.setBeta1(0.95);
        lion.setBeta2(0.98);
        assertArrayEquals(new double[] {0.95, 0.98}, new double[] {lion.getBeta1(), lion.getBeta2()});
    }

    static void refused(String setting, OptimizerOptions o, Consumer<OptimizerOptions> set, String field) {
        double before = get(setting, o);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> set.accept(o), setting);
        assertTrue(e instanceof ShardoptException && ((ShardoptException) e).getStatus() == 1, setting + ": " + e);
        assertTrue(e.getMessage().startsWith("SHARDOPT_ERR_INVALID_ARGUMENT: ") && e.getMessage().contains(field), e.getMessage());
        assertEquals(before, get(setting, o), 0.0, setting + ": the old value stays");
    }

    @Test
    void badValuesAreTheLibrarysErrors() {
        refused("Beta2", new LionOptimizerOptions(), o -> o.setBeta2(1.5), "beta2");
        refused("MomentumDecay", new NadamOptimizerOptions(), o -> o.setMomentumDecay(-1), "momentum_decay");
        refused("Beta1", new AdaMaxOptimizerOptions(), o -> o.setBeta1(1), "beta1");
        refused("Rho", new AdaDeltaOptimizerOptions(), o -> o.setRho(1.5), "rho");
        refused("Beta2Decay", new AdafactorOptimizerOptions(), o -> o.setBeta2Decay(0.5), "beta2_decay");
        refused("Epsilon2", new AdafactorOptimizerOptions(), o -> o.setEpsilon2(-1), "eps2");
        refused("ClipThreshold", new AdafactorOptimizerOptions(), o -> o.setClipThreshold(0.5), "clip_threshold");
        refused("NewtonSchulzSteps", new MuonOptimizerOptions(), o -> o.setNewtonSchulzSteps(100), "ns_steps");
        refused("NewtonSchulzB", new MuonOptimizerOptions(), o -> o.setNewtonSchulzB(Double.POSITIVE_INFINITY), "ns_b");
        refused("AdamWLearningRate", new MuonOptimizerOptions(), o -> o.setAdamWLearningRate(-1), "adamw_lr");
        refused("AdamWWeightDecay", new MuonOptimizerOptions(), o -> o.setAdamWWeightDecay(-0.1), "adamw_weight_decay");
        refused("AdamWEpsilon", new MuonOptimizerOptions(), o -> o.setAdamWEpsilon(Double.NaN), "adamw_eps");
        // low-bit state is Adam's, AdamW's and SGD-with-momentum's; decoupled weight decay NAdam's
        refused("StatePrecision", new LionOptimizerOptions(), o -> o.setStatePrecision(StatePrecision.BITS8), "state_precision");
        refused("DecoupledWeightDecay", new AdamOptimizerOptions(), o -> o.setDecoupledWeightDecay(true), "decoupled_weight_decay");
    }

    /** Lion, NAdam, AdaMax and AdaDelta under DDP, ZeRO-1, ZeRO-2 and FSDP on 2 ranks: the ranks agree, the loss falls. */
    @Test
    void lionNadamAdaMaxAdaDeltaTrain() {
        MlpDemo model = new MlpDemo();
        long[] all = new long[model.samples];
        for (int i = 0; i < all.length; ++i) all[i] = i;
        double start = model.loss(model.initialParameters());
        Object[][] runs = {
            {"Lion", (Supplier<Optimizer>) () -> { LionOptimizerOptions o = plain(new LionOptimizerOptions()); o.setLearningRate(3e-3); return new LionOptimizer(o); },
             "ddp"},
            {"Nadam", (Supplier<Optimizer>) () -> new NadamOptimizer(plain(new NadamOptimizerOptions())), "zero1"},
            {"AdaMax", (Supplier<Optimizer>) () -> new AdaMaxOptimizer(plain(new AdaMaxOptimizerOptions())), "zero2"},
            {"AdaDelta", (Supplier<Optimizer>) () -> new AdaDeltaOptimizer(plain(new AdaDeltaOptimizerOptions())), "fsdp"}};
        for (Object[] k : runs) {
            String name = (String) k[0], strategy = (String) k[2];
            List<Object[]> out = Ranks.run(2, b -> {
                Optimizer wrapped = ((Supplier<Optimizer>) k[1]).get();
                ShardingConfiguration cfg = new ShardingConfiguration(b);
                ShardedOptimizer opt = strategy.equals("ddp") ? new DDPOptimizer(wrapped, cfg) : strategy.equals("zero1") ? new ZeRO1Optimizer(wrapped, cfg)
                    : strategy.equals("zero2") ? new ZeRO2Optimizer(wrapped, cfg) : new FSDPOptimizer(wrapped, cfg);
                try (ShardedOptimizer s = opt) {
                    s.initialize(model.layout(), model.initialParameters());
                    OptimizationResult r = s.optimize(model, new OptimizationInputData(model.samples));
                    return new Object[] {r, s.getParametersFloat()};
                }
            });
            OptimizationResult r = (OptimizationResult) out.get(0)[0];
            float[] p = (float[]) out.get(0)[1];
            assertArrayEquals(p, (float[]) out.get(1)[1], name + ": the ranks agree");
            assertEquals(16, r.getSteps(), name);
            assertEquals(4, r.getIterations(), name);
            double[] h = r.getFitnessHistory();
            for (int i = 1; i < h.length; ++i) assertTrue(h[i] < h[i - 1], name + ": the loss falls every epoch " + java.util.Arrays.toString(h));
            double end = model.loss(p);
            assertTrue(end < 0.9 * start, name + ": loss " + start + " -> " + end);
        }
    }

    static <O extends OptimizerOptions> O plain(O o) {
        o.setBatchSize(128);
        o.setMaxIterations(4);
        o.setShuffleData(false);
        o.setUseEarlyStopping(false);
        return o;
    }
}
