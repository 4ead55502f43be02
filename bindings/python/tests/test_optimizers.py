"""Issue 37's optimizer classes (Lion, Adafactor, NAdam, AdaMax, AdaDelta, Muon): torch.optim's defaults as the
library's presets give them, their settings over the C fields, the library's checks, and training through the sharded
optimizers for the rules the engine runs (Lion, NAdam, AdaMax, AdaDelta)."""
import math

import numpy as np
import pytest

import shardopt as so
from shardopt import native as n
from mlp_demo import MlpDemo
from ranks import launch_in_memory

CLASSES = {  # class -> (its options class, the preset, the kind the preset gives)
    so.LionOptimizer: (so.LionOptimizerOptions, n.SHARDOPT_PRESET_LION, n.SHARDOPT_LION),
    so.AdafactorOptimizer: (so.AdafactorOptimizerOptions, n.SHARDOPT_PRESET_ADAFACTOR, n.SHARDOPT_ADAFACTOR),
    so.NadamOptimizer: (so.NadamOptimizerOptions, n.SHARDOPT_PRESET_NADAM, n.SHARDOPT_NADAM),
    so.AdaMaxOptimizer: (so.AdaMaxOptimizerOptions, n.SHARDOPT_PRESET_ADAMAX, n.SHARDOPT_ADAMAX),
    so.AdaDeltaOptimizer: (so.AdaDeltaOptimizerOptions, n.SHARDOPT_PRESET_ADADELTA, n.SHARDOPT_ADADELTA),
    so.MuonOptimizer: (so.MuonOptimizerOptions, n.SHARDOPT_PRESET_MUON, n.SHARDOPT_MUON),
}
# every setting of the options over shardopt_optimizer_options, and its C field
FIELDS = {"learning_rate": "lr", "weight_decay": "weight_decay", "maximize": "maximize", "momentum": "momentum",
          "dampening": "dampening", "nesterov": "nesterov", "beta1": "beta1", "beta2": "beta2", "epsilon": "eps",
          "amsgrad": "amsgrad", "decay": "alpha", "centered": "centered", "learning_rate_decay": "lr_decay",
          "initial_accumulator_value": "initial_accumulator_value", "state_precision": "state_precision",
          "momentum_decay": "momentum_decay", "decoupled_weight_decay": "decoupled_weight_decay", "rho": "rho",
          "beta2_decay": "beta2_decay", "epsilon2": "eps2", "clip_threshold": "clip_threshold",
          "newton_schulz_steps": "ns_steps", "newton_schulz_a": "ns_a", "newton_schulz_b": "ns_b",
          "newton_schulz_c": "ns_c", "learning_rate_adjustment": "adjust_lr", "adamw_learning_rate": "adamw_lr",
          "adamw_weight_decay": "adamw_weight_decay", "adamw_epsilon": "adamw_eps"}


@pytest.mark.parametrize("cls", list(CLASSES), ids=lambda c: c.__name__)
def test_options_are_the_library_preset(cls):
    options_type, preset, kind = CLASSES[cls]
    assert cls.options_type is options_type and options_type.__name__ == cls.__name__ + "Options"
    ref = n.shardopt_optimizer_options()
    n.shardopt_optimizer_options_init_preset(ref, ref.struct_size, preset)
    for o in (options_type(), cls().get_options(), cls(options_type()).options):
        assert isinstance(o, options_type) and o._optimizer.kind == ref.kind == kind
        for setting, field in FIELDS.items():
            assert getattr(o, setting) == getattr(ref, field), (cls.__name__, setting)


def test_torch_defaults():
    lion = so.LionOptimizerOptions()
    assert (lion.learning_rate, lion.beta1, lion.beta2, lion.weight_decay) == (1e-4, 0.9, 0.99, 0.0)
    f = so.AdafactorOptimizerOptions()
    assert (f.learning_rate, f.beta2_decay, f.epsilon, f.epsilon2, f.clip_threshold, f.weight_decay) == \
        (1e-2, -0.8, 0.0, 1e-3, 1.0, 0.0)
    na = so.NadamOptimizerOptions()
    assert (na.learning_rate, na.beta1, na.beta2, na.epsilon, na.momentum_decay, na.decoupled_weight_decay) == \
        (2e-3, 0.9, 0.999, 1e-8, 4e-3, False)
    mx = so.AdaMaxOptimizerOptions()
    assert (mx.learning_rate, mx.beta1, mx.beta2, mx.epsilon, mx.weight_decay) == (2e-3, 0.9, 0.999, 1e-8, 0.0)
    d = so.AdaDeltaOptimizerOptions()
    assert (d.learning_rate, d.rho, d.epsilon, d.weight_decay) == (1.0, 0.9, 1e-6, 0.0)
    m = so.MuonOptimizerOptions()
    assert (m.learning_rate, m.momentum, m.nesterov, m.weight_decay, m.newton_schulz_steps) == (1e-3, 0.95, True, 0.1, 5)
    assert (m.newton_schulz_a, m.newton_schulz_b, m.newton_schulz_c) == (3.4445, -4.7750, 2.0315)
    assert m.learning_rate_adjustment is so.MuonLearningRateAdjustment.ORIGINAL
    assert (m.adamw_learning_rate, m.adamw_weight_decay, m.adamw_epsilon) == (1e-3, 1e-2, 1e-8)
    for o in (lion, f, na, mx, d, m, so.AdamOptimizerOptions()):
        assert o.state_precision is so.StatePrecision.FULL


def test_settings_round_trip():
    na = so.NadamOptimizerOptions(momentum_decay=5e-3, decoupled_weight_decay=True, weight_decay=0.01)
    assert (na.momentum_decay, na.decoupled_weight_decay, na._optimizer.decoupled_weight_decay) == (5e-3, True, 1)
    assert so.AdaDeltaOptimizerOptions(rho=0.95).rho == 0.95
    f = so.AdafactorOptimizer(beta2_decay=-0.5, epsilon2=2e-3, clip_threshold=1.5, epsilon=1e-30).get_options()
    assert (f.beta2_decay, f.epsilon2, f.clip_threshold, f.epsilon) == (-0.5, 2e-3, 1.5, 1e-30)
    m = so.MuonOptimizerOptions(newton_schulz_steps=3, newton_schulz_a=2.0, newton_schulz_b=-1.5, newton_schulz_c=0.5,
                                adamw_learning_rate=3e-4, adamw_weight_decay=0.0, adamw_epsilon=1e-6, nesterov=False)
    assert (m.newton_schulz_steps, m.newton_schulz_a, m.newton_schulz_b, m.newton_schulz_c) == (3, 2.0, -1.5, 0.5)
    assert (m.adamw_learning_rate, m.adamw_weight_decay, m.adamw_epsilon, m.nesterov) == (3e-4, 0.0, 1e-6, False)
    assert (m._optimizer.ns_steps, m._optimizer.adamw_lr) == (3, 3e-4)  # the C fields themselves
    for value, member in (("match_rms_adamw", so.MuonLearningRateAdjustment.MATCH_RMS_ADAMW),
                          (so.MuonLearningRateAdjustment.SPECTRAL_UNCLAMPED, so.MuonLearningRateAdjustment.SPECTRAL_UNCLAMPED),
                          (n.SHARDOPT_MUON_LR_ORIGINAL, so.MuonLearningRateAdjustment.ORIGINAL)):
        m.learning_rate_adjustment = value
        assert m.learning_rate_adjustment is member and m._optimizer.adjust_lr == int(member)
    o = so.AdamOptimizerOptions()
    for value, member, c in (("8bit", so.StatePrecision.BITS8, n.SHARDOPT_STATE_8BIT),
                             ("4BIT", so.StatePrecision.BITS4, n.SHARDOPT_STATE_4BIT),
                             (so.StatePrecision.BITS8, so.StatePrecision.BITS8, n.SHARDOPT_STATE_8BIT),
                             ("full", so.StatePrecision.FULL, n.SHARDOPT_STATE_FULL)):
        o.state_precision = value
        assert o.state_precision is member and o._optimizer.state_precision == c
    assert so.MomentumOptimizerOptions(state_precision="4bit").state_precision is so.StatePrecision.BITS4
    lion = so.LionOptimizerOptions(beta1=0.95, beta2=0.98)
    assert (lion.beta1, lion.beta2) == (0.95, 0.98)


@pytest.mark.parametrize("options, setting, value, field", [
    (so.LionOptimizerOptions, "beta2", 1.5, "beta2"),
    (so.NadamOptimizerOptions, "momentum_decay", -1.0, "momentum_decay"),
    (so.AdaMaxOptimizerOptions, "beta1", 1.0, "beta1"),
    (so.AdaDeltaOptimizerOptions, "rho", 1.5, "rho"),
    (so.AdafactorOptimizerOptions, "beta2_decay", 0.5, "beta2_decay"),
    (so.AdafactorOptimizerOptions, "epsilon2", -1.0, "eps2"),
    (so.AdafactorOptimizerOptions, "clip_threshold", 0.5, "clip_threshold"),
    (so.MuonOptimizerOptions, "newton_schulz_steps", 100, "ns_steps"),
    (so.MuonOptimizerOptions, "newton_schulz_b", math.inf, "ns_a, ns_b and ns_c"),
    (so.MuonOptimizerOptions, "adamw_learning_rate", -1.0, "adamw_lr"),
    (so.MuonOptimizerOptions, "adamw_weight_decay", -0.1, "adamw_weight_decay"),
    (so.MuonOptimizerOptions, "adamw_epsilon", math.nan, "adamw_eps"),
    (so.LionOptimizerOptions, "state_precision", "8bit", "state_precision"),  # low-bit state: Adam, AdamW, SGD only
    (so.AdamOptimizerOptions, "decoupled_weight_decay", True, "decoupled_weight_decay"),  # NAdam's only
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_bad_values_are_the_library_errors(options, setting, value, field):
    o = options()
    before = getattr(o, setting)
    with pytest.raises(so.InvalidArgumentError, match=f"^SHARDOPT_ERR_INVALID_ARGUMENT: {setting} = .*: {field}") as e:
        setattr(o, setting, value)
    assert e.value.status == n.SHARDOPT_ERR_INVALID_ARGUMENT
    assert getattr(o, setting) == before  # the old value stays
    with pytest.raises(so.InvalidArgumentError, match=field):
        options(**{setting: value})


def test_enum_settings_take_only_their_values():
    with pytest.raises(ValueError, match="unknown state precision '2bit'"):
        so.AdamOptimizerOptions(state_precision="2bit")
    with pytest.raises(ValueError, match="unknown Muon learning-rate adjustment 7"):
        so.MuonOptimizerOptions(learning_rate_adjustment=7)
    with pytest.raises(TypeError):
        so.LionOptimizerOptions(rho_typo=0.9)


MODEL = MlpDemo()
TRAINED = [(so.LionOptimizer, dict(learning_rate=3e-3), so.DDPOptimizer),
           (so.NadamOptimizer, {}, so.ZeRO1Optimizer),
           (so.AdaMaxOptimizer, {}, so.ZeRO2Optimizer),
           (so.AdaDeltaOptimizer, {}, so.FSDPOptimizer)]


@pytest.mark.parametrize("cls, settings, strategy", TRAINED, ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_trains_through_a_sharded_optimizer(cls, settings, strategy):
    def rank(backend):
        base = cls(batch_size=128, max_iterations=4, shuffle_data=False, use_early_stopping=False, **settings)
        with strategy(base, so.ShardingConfiguration(backend), layout=MODEL.layout(),
                      initial=MODEL.initial_parameters()) as opt:
            result = opt.optimize(MODEL, so.OptimizationInputData(num_samples=MODEL.samples))
            return result, opt.get_parameters()
    (r0, p0), (r1, p1) = launch_in_memory(2, rank)
    np.testing.assert_array_equal(p0, p1)
    assert r0.steps == 16 and r0.iterations == 4
    history = r0.fitness_history
    assert all(b < a for a, b in zip(history, history[1:])), history
    assert MODEL.loss(p0) < 0.9 * MODEL.loss(MODEL.initial_parameters())


@pytest.mark.parametrize("precision, codes", [("8bit", 1.0), ("4bit", 0.5)])
def test_low_bit_state_trains_and_costs_its_codes(precision, codes):
    """8-bit and 4-bit Adam state through the binding: a 5000-element tensor keeps one (or half a) byte per element
    and a float scale per block (256 or 128 elements), and trains the same on 2 ranks under ZeRO-2 as on 1 under DDP."""
    layout = so.ParameterLayout(np.float32).add("w", 5000)
    start = np.linspace(-1, 1, 5000, dtype=np.float32)
    target = np.cos(np.arange(5000, dtype=np.float32))

    def model(p, g, samples):
        g[:] = p - target
        return float(0.5 * np.mean((p - target) ** 2))

    def rank(strategy):
        def run(backend):
            base = so.AdamOptimizer(learning_rate=0.01, state_precision=precision, batch_size=4, max_iterations=3,
                                    use_early_stopping=False, shuffle_data=False)
            with strategy(base, so.ShardingConfiguration(backend), layout=layout, initial=start) as opt:
                stats = opt.memory_stats()
                opt.optimize(model, so.OptimizationInputData(num_samples=8))
                return stats, opt.get_parameters()
        return run
    (stats, one), = launch_in_memory(1, rank(so.DDPOptimizer))
    block = 256 if precision == "8bit" else 128
    assert stats.optimizer_state_bytes == 2 * (int(5000 * codes) + -(-5000 // block) * 4)
    (_, p0), (_, p1) = launch_in_memory(2, rank(so.ZeRO2Optimizer))
    np.testing.assert_array_equal(p0, one)
    assert np.abs(one - target).mean() < np.abs(start - target).mean()
