"""Base optimizers and their options. Defaults are read from the library (torch.optim's)."""
import numpy as np

from . import shardopt_native as _n

__all__ = ["OptimizerOptions", "StochasticGradientDescentOptimizerOptions", "MomentumOptimizerOptions",
           "AdamOptimizerOptions", "AdamWOptimizerOptions", "RootMeanSquarePropagationOptimizerOptions",
           "AdagradOptimizerOptions", "LambOptimizerOptions", "Optimizer", "StochasticGradientDescentOptimizer",
           "MomentumOptimizer", "AdamOptimizer", "AdamWOptimizer", "RootMeanSquarePropagationOptimizer",
           "AdagradOptimizer", "LambOptimizer"]


def _field(name, conv=float, doc=""):
    def get(self):
        v = getattr(self._native, name)
        return bool(v) if conv is bool else v

    def set_(self, value):
        setattr(self._native, name, int(bool(value)) if conv is bool else conv(value))

    return property(get, set_, doc=doc)


def _py_field(name, conv, minimum, doc=""):
    def get(self):
        return self._py[name]

    def set_(self, value):
        if conv is bool:
            value = bool(value)
        else:
            if conv is int and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
            value = conv(value)
            if value < minimum:
                raise ValueError(f"{name} must be >= {minimum} (got {value})")
        self._py[name] = value

    return property(get, set_, doc=doc)


class OptimizerOptions:
    """Options of a base optimizer (shardopt_optimizer_options). Keyword arguments set properties."""

    _kind = _n.SHARDOPT_ADAM

    def __init__(self, **kwargs):
        self._native = _n.shardopt_optimizer_options()
        _n.so_optimizer_options_defaults(self._native, self._kind)
        self._py = {"batch_size": 0, "epochs": 1, "use_early_stopping": False, "early_stopping_patience": 10,
                    "tolerance": 1e-6, "shuffle": False, "seed": 0}
        self._defaults()
        for k, v in kwargs.items():
            if not isinstance(getattr(type(self), k, None), property):
                raise TypeError(f"{type(self).__name__} has no option '{k}'")
            setattr(self, k, v)

    def _defaults(self):
        pass

    learning_rate = _field("lr", doc="step size (InitialLearningRate in AiDotNet)")
    weight_decay = _field("weight_decay")
    maximize = _field("maximize", bool)
    momentum = _field("momentum")
    dampening = _field("dampening")
    nesterov = _field("nesterov", bool)
    beta1 = _field("beta1")
    beta2 = _field("beta2")
    epsilon = _field("eps")
    amsgrad = _field("amsgrad", bool)
    decay = _field("alpha", doc="RMSprop's smoothing constant (torch's alpha)")
    centered = _field("centered", bool)
    learning_rate_decay = _field("lr_decay")
    initial_accumulator_value = _field("initial_accumulator_value")
    initial_learning_rate = _field("lr", doc="AiDotNet's name for learning_rate")

    # the training loop's settings (optimize(input_data)); OptimizationInputData may override them
    batch_size = _py_field("batch_size", int, 0, "global batch per step; 0 (the default) = the whole data set")
    epochs = _py_field("epochs", int, 1, "passes over the training data (1)")
    max_epochs = epochs
    use_early_stopping = _py_field("use_early_stopping", bool, None, "stop when the score stops improving")
    early_stopping_patience = _py_field("early_stopping_patience", int, 1, "epochs without improvement (10)")
    tolerance = _py_field("tolerance", float, 0, "smaller improvements do not count (1e-6)")
    shuffle = _py_field("shuffle", bool, None, "a fresh sample order every epoch, the same on every rank")
    seed = _py_field("seed", int, 0, "the shuffle's seed")

    def __repr__(self):
        return f"{type(self).__name__}(learning_rate={self.learning_rate}, weight_decay={self.weight_decay})"


class StochasticGradientDescentOptimizerOptions(OptimizerOptions):
    _kind = _n.SHARDOPT_SGD


class MomentumOptimizerOptions(OptimizerOptions):
    """SGD with momentum 0.9 (AiDotNet's MomentumOptimizer default) unless given."""
    _kind = _n.SHARDOPT_SGD

    def _defaults(self):
        self.momentum = 0.9


class AdamOptimizerOptions(OptimizerOptions):
    _kind = _n.SHARDOPT_ADAM


class AdamWOptimizerOptions(OptimizerOptions):
    _kind = _n.SHARDOPT_ADAMW


class RootMeanSquarePropagationOptimizerOptions(OptimizerOptions):
    _kind = _n.SHARDOPT_RMSPROP


class AdagradOptimizerOptions(OptimizerOptions):
    _kind = _n.SHARDOPT_ADAGRAD


class LambOptimizerOptions(OptimizerOptions):
    _kind = _n.SHARDOPT_LAMB


class Optimizer:
    """A base optimizer: the update rule a sharded optimizer runs on its full buffer or its shard.

    AiDotNet's form: AdamOptimizer(model, options) (the model: a shardopt.Model, whose layout
    and parameters a sharded optimizer wrapping this one is created with); also
    AdamOptimizer(options), AdamOptimizer(learning_rate=...) and AdamOptimizer(model, learning_rate=...).
    """

    options_type = OptimizerOptions

    def __init__(self, model=None, options=None, **kwargs):
        if isinstance(model, OptimizerOptions) and options is None:
            model, options = None, model
        if model is not None and not _is_model(model):
            raise TypeError(f"model must be a shardopt.Model (parameter_layout, get_parameters, "
                            f"loss_and_gradient), not {type(model).__name__}")
        if options is None:
            options = self.options_type(**kwargs)
        elif kwargs:
            raise TypeError("pass either an options object or keyword options, not both")
        elif not isinstance(options, self.options_type):
            raise TypeError(f"{type(self).__name__} needs {self.options_type.__name__}, got {type(options).__name__}")
        self.model = model
        self.options = options

    def get_options(self):
        return self.options

    def __repr__(self):
        return f"{type(self).__name__}({self.options!r})"


def _is_model(obj):
    return all(callable(getattr(obj, a, None)) for a in ("parameter_layout", "get_parameters", "loss_and_gradient"))


class StochasticGradientDescentOptimizer(Optimizer):
    options_type = StochasticGradientDescentOptimizerOptions


class MomentumOptimizer(Optimizer):
    options_type = MomentumOptimizerOptions


class AdamOptimizer(Optimizer):
    options_type = AdamOptimizerOptions


class AdamWOptimizer(Optimizer):
    options_type = AdamWOptimizerOptions


class RootMeanSquarePropagationOptimizer(Optimizer):
    options_type = RootMeanSquarePropagationOptimizerOptions


class AdagradOptimizer(Optimizer):
    options_type = AdagradOptimizerOptions


class LambOptimizer(Optimizer):
    options_type = LambOptimizerOptions
