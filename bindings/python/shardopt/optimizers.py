"""Base optimizers and their options (AiDotNet's classes): the C structs of the base optimizer (filled by the
library's preset for the class) and of training (filled by shardopt_training_options_init), checked as they are set."""
import enum
from functools import partial

from . import shardopt_native as _n
from ._core import Setting, parse_enum
from .schedules import LearningRateSchedule



class StatePrecision(enum.IntEnum):
    """How Adam, AdamW and SGD with momentum keep their state (the C ABI's shardopt_state_precision): FULL, or blockwise
    quantized BITS8 / BITS4 (docs/optimizers.md); a name works too ("full", "8bit", "4bit")."""
    FULL, BITS8, BITS4 = _n.SHARDOPT_STATE_FULL, _n.SHARDOPT_STATE_8BIT, _n.SHARDOPT_STATE_4BIT
    parse = classmethod(lambda cls, value: parse_enum(cls, value, "state precision",
                                                      {"8BIT": cls.BITS8, "4BIT": cls.BITS4}))


class MuonLearningRateAdjustment(enum.IntEnum):
    """Muon's learning-rate scale for a rows x cols matrix (the C ABI's shardopt_muon_lr_adjust, torch.optim.Muon's
    adjust_lr_fn): ORIGINAL sqrt(max(1, rows / cols)), MATCH_RMS_ADAMW 0.2 sqrt(max(rows, cols)), SPECTRAL_UNCLAMPED
    sqrt(rows / cols); a name works too ("original", "match_rms_adamw", ...)."""
    ORIGINAL = _n.SHARDOPT_MUON_LR_ORIGINAL
    MATCH_RMS_ADAMW = _n.SHARDOPT_MUON_LR_MATCH_RMS_ADAMW
    SPECTRAL_UNCLAMPED = _n.SHARDOPT_MUON_LR_SPECTRAL_UNCLAMPED
    parse = classmethod(lambda cls, value: parse_enum(cls, value, "Muon learning-rate adjustment"))


_opt = partial(Setting, "_optimizer", validate=_n.shardopt_optimizer_options_validate)
_train = partial(Setting, "_training", validate=_n.shardopt_training_options_validate)


class OptimizerOptions:
    """Keyword arguments set the settings below: AiDotNet's names in snake_case, and shorter aliases."""
    _preset = _n.SHARDOPT_PRESET_ADAM

    def __init__(self, **kwargs):
        self._optimizer, self._training = _n.shardopt_optimizer_options(), _n.shardopt_training_options()
        _n.shardopt_optimizer_options_init_preset(self._optimizer, self._optimizer.struct_size, self._preset)
        _n.shardopt_training_options_init(self._training)
        self._schedule = None
        for k, v in kwargs.items():  # each a setting (or property) of the class
            if not isinstance(getattr(type(self), k, None), (Setting, property)):
                raise TypeError(f"{type(self).__name__} has no setting '{k}'")
            setattr(self, k, v)

    # the base optimizer (torch.optim's formulas)
    initial_learning_rate = _opt("lr", doc="AiDotNet's InitialLearningRate: the rate training starts from")
    learning_rate = _opt("lr", doc="the same as initial_learning_rate")
    weight_decay, momentum, dampening = _opt("weight_decay"), _opt("momentum"), _opt("dampening")
    beta1, beta2, epsilon = _opt("beta1"), _opt("beta2"), _opt("eps")
    maximize, nesterov, amsgrad, centered = _opt("maximize", bool), _opt("nesterov", bool), _opt("amsgrad", bool), \
        _opt("centered", bool)
    decay = _opt("alpha", doc="RMSprop's smoothing constant (torch's alpha)")
    learning_rate_decay, initial_accumulator_value = _opt("lr_decay"), _opt("initial_accumulator_value")
    state_precision = _opt("state_precision", StatePrecision, doc="Adam, AdamW, SGD with momentum: a StatePrecision, "
                           "or 'full', '8bit', '4bit' (not with amsgrad)")
    momentum_decay = _opt("momentum_decay", doc="NAdam's momentum decay (psi)")
    decoupled_weight_decay = _opt("decoupled_weight_decay", bool, doc="NAdam: AdamW-style weight decay, not L2")
    rho = _opt("rho", doc="Adadelta's decay of its running averages")
    beta2_decay = _opt("beta2_decay", doc="Adafactor: the second moment's decay rate is t ** beta2_decay")
    epsilon2 = _opt("eps2", doc="Adafactor's eps2 (epsilon is its eps1; 0: the element type's machine epsilon)")
    clip_threshold = _opt("clip_threshold", doc="Adafactor: the update's RMS clipping threshold (torch's d)")
    newton_schulz_steps = _opt("ns_steps", int, doc="Muon: Newton-Schulz iterations of each matrix's orthogonalization")
    newton_schulz_a, newton_schulz_b, newton_schulz_c = _opt("ns_a"), _opt("ns_b"), _opt("ns_c")
    learning_rate_adjustment = _opt("adjust_lr", MuonLearningRateAdjustment,
                                    doc="Muon: a MuonLearningRateAdjustment (or its name), torch's adjust_lr_fn")
    adamw_learning_rate = _opt("adamw_lr", doc="Muon: AdamW's learning rate on the tensors that are not matrices")
    adamw_weight_decay = _opt("adamw_weight_decay", doc="Muon: AdamW's weight decay on the tensors that are not matrices")
    adamw_epsilon = _opt("adamw_eps", doc="Muon: AdamW's epsilon on the tensors that are not matrices")
    # training: an epoch is a pass over the training set, a step one optimizer step
    max_iterations = _train("max_epochs", int, doc="AiDotNet's MaxIterations: the most epochs")
    batch_size = _train("batch_size", int, doc="samples per step over all ranks; 0: the whole training set")
    max_steps = _train("max_steps", int, doc="the most steps over all epochs; 0: no limit")
    shuffle_data = _train("shuffle", bool, doc="a fresh sample order each epoch, from (random_seed, epoch)")
    random_seed = _train("seed", int)
    use_early_stopping = _train("early_stopping", bool, doc="voted across ranks")
    early_stopping_patience = _train("patience", int, doc="epochs in a row without progress before stopping")
    tolerance = _train("tolerance", doc="what a score must drop by to count as progress")
    evaluate_best_solution = _train("evaluate_best", bool, doc="the best solution's loss on every set, at the end")
    device_batches = _train("device_batches", bool, doc="the model on the GPU: with an optimizer in CUDA memory, "
                            "optimize(model, ...) hands the model DeviceArray views of the library's device memory "
                            "instead of host copies (torch.from_dlpack(params)); views expire when the call returns")

    @property
    def learning_rate_schedule(self):
        """None (the rate stays), or a LearningRateSchedule the library applies to the rate training starts from."""
        return self._schedule

    @learning_rate_schedule.setter
    def learning_rate_schedule(self, schedule):
        if schedule is not None:
            if not isinstance(schedule, LearningRateSchedule):
                raise TypeError(f"learning_rate_schedule must be a LearningRateSchedule, not {type(schedule).__name__}")
            _n.shardopt_training_options_validate(schedule._applied(self._training))
        self._schedule = schedule

    def _training_for(self, num_samples, num_validation, num_test):
        """A copy of the training settings for one optimize() call."""
        t = self._schedule._applied(self._training) if self._schedule else self._training.copy()
        t.num_samples, t.num_validation_samples, t.num_test_samples = num_samples, num_validation, num_test
        return t


class Optimizer:
    """A base optimizer: the update rule a sharded optimizer runs on its full buffer or its shard. AiDotNet's form:
    AdamOptimizer(model, options), the model a shardopt.Model whose layout, element type and parameters a sharded
    optimizer wrapping it is created with; also AdamOptimizer(options) and AdamOptimizer([model, ]learning_rate=...)."""
    options_type = OptimizerOptions

    def __init__(self, model=None, options=None, **kwargs):
        if isinstance(model, OptimizerOptions) and options is None:
            model, options = None, model
        if model is not None and not all(callable(getattr(model, a, None))
                                         for a in ("parameter_layout", "get_parameters", "loss_and_gradient")):
            raise TypeError(f"model must be a shardopt.Model (parameter_layout, get_parameters, loss_and_gradient), "
                            f"not {type(model).__name__}")
        if options is not None and kwargs:
            raise TypeError("pass either an options object or keyword options, not both")
        if options is not None and not isinstance(options, self.options_type):
            raise TypeError(f"{type(self).__name__} needs {self.options_type.__name__}, got {type(options).__name__}")
        self.model, self.options = model, self.options_type(**kwargs) if options is None else options

    def get_options(self):
        return self.options


def _optimizer(name, preset):
    """AiDotNet's optimizer class `name` and its options class, over the library's preset."""
    options = type(name + "Options", (OptimizerOptions,), {"_preset": preset, "__module__": __name__})
    return type(name, (Optimizer,), {"options_type": options, "__module__": __name__}), options


StochasticGradientDescentOptimizer, StochasticGradientDescentOptimizerOptions = _optimizer(
    "StochasticGradientDescentOptimizer", _n.SHARDOPT_PRESET_SGD)
MomentumOptimizer, MomentumOptimizerOptions = _optimizer("MomentumOptimizer", _n.SHARDOPT_PRESET_MOMENTUM)
AdamOptimizer, AdamOptimizerOptions = _optimizer("AdamOptimizer", _n.SHARDOPT_PRESET_ADAM)
AdamWOptimizer, AdamWOptimizerOptions = _optimizer("AdamWOptimizer", _n.SHARDOPT_PRESET_ADAMW)
RootMeanSquarePropagationOptimizer, RootMeanSquarePropagationOptimizerOptions = _optimizer(
    "RootMeanSquarePropagationOptimizer", _n.SHARDOPT_PRESET_RMSPROP)
AdagradOptimizer, AdagradOptimizerOptions = _optimizer("AdagradOptimizer", _n.SHARDOPT_PRESET_ADAGRAD)
LambOptimizer, LambOptimizerOptions = _optimizer("LambOptimizer", _n.SHARDOPT_PRESET_LAMB)
# issue 37: torch.optim's rules and defaults (docs/optimizers.md)
LionOptimizer, LionOptimizerOptions = _optimizer("LionOptimizer", _n.SHARDOPT_PRESET_LION)
AdafactorOptimizer, AdafactorOptimizerOptions = _optimizer("AdafactorOptimizer", _n.SHARDOPT_PRESET_ADAFACTOR)
NadamOptimizer, NadamOptimizerOptions = _optimizer("NadamOptimizer", _n.SHARDOPT_PRESET_NADAM)
AdaMaxOptimizer, AdaMaxOptimizerOptions = _optimizer("AdaMaxOptimizer", _n.SHARDOPT_PRESET_ADAMAX)
AdaDeltaOptimizer, AdaDeltaOptimizerOptions = _optimizer("AdaDeltaOptimizer", _n.SHARDOPT_PRESET_ADADELTA)
MuonOptimizer, MuonOptimizerOptions = _optimizer("MuonOptimizer", _n.SHARDOPT_PRESET_MUON)
