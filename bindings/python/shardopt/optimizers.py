"""Base optimizers and their options. Defaults are read from the library (torch.optim's)."""
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


class OptimizerOptions:
    """Options of a base optimizer (shardopt_optimizer_options). Keyword arguments set properties."""

    _kind = _n.SHARDOPT_ADAM

    def __init__(self, **kwargs):
        self._native = _n.shardopt_optimizer_options()
        _n.so_optimizer_options_defaults(self._native, self._kind)
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
    """A base optimizer: the update rule a sharded optimizer runs on its full buffer or its shard."""

    options_type = OptimizerOptions

    def __init__(self, options=None, **kwargs):
        if options is None:
            options = self.options_type(**kwargs)
        elif kwargs:
            raise TypeError("pass either an options object or keyword options, not both")
        elif not isinstance(options, self.options_type):
            raise TypeError(f"{type(self).__name__} needs {self.options_type.__name__}, got {type(options).__name__}")
        self.options = options

    def get_options(self):
        return self.options

    def __repr__(self):
        return f"{type(self).__name__}({self.options!r})"


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
