"""Learning-rate schedules: the library's (the lr_* fields of shardopt_training_options), as an options object's
learning_rate_schedule, applied to `base`, the rate training starts from, before every epoch (per_step: every step);
schedule(t, base[, options]) is the library's rate at t. A parameter left None takes the library's default."""
from . import shardopt_native as _n
from ._core import convert, set_checked


def _defaults():
    t = _n.shardopt_training_options()
    _n.shardopt_training_options_init(t)
    return t


class LearningRateSchedule:
    _kind = _n.SHARDOPT_LR_CONSTANT

    def __init__(self, per_step=False, kind=None, **fields):
        self.per_step, self._kind, self._fields = bool(per_step), kind or self._kind, {}
        probe = _defaults()
        probe.lr_schedule = self._kind
        for name, (field, value) in fields.items():
            if value is not None:
                value = convert(float if field in ("gamma", "min_lr") else int, value)
                set_checked(probe, field, value, name, _n.shardopt_training_options_validate)
                self._fields[field] = value

    def _applied(self, training):
        """A copy of the training options `training` with this schedule."""
        t = training.copy()
        t.lr_schedule, t.lr_per_step = self._kind, int(self.per_step)
        for field, value in self._fields.items():
            setattr(t, field, value)
        if getattr(self, "fn", None):  # the library calls self.fn, which this schedule keeps
            t.lr_fn, t.lr_user_data = _n.SO_PY_LR_FN, self.fn
        return t

    def __call__(self, t, base, options=None):
        probe = self._applied(_defaults() if options is None else options._training)
        probe.num_samples = probe.num_samples or 1
        return _n.shardopt_training_learning_rate(probe, int(t), float(base))


class ConstantSchedule(LearningRateSchedule):
    """The base rate throughout (the default)."""


class CosineAnnealingSchedule(LearningRateSchedule):
    """torch's CosineAnnealingLR, from base down to min_learning_rate over `total` epochs (steps); None: to the end."""
    _kind = _n.SHARDOPT_LR_COSINE

    def __init__(self, total=None, min_learning_rate=None, per_step=False):
        super().__init__(per_step, total=("decay_period", total), min_learning_rate=("min_lr", min_learning_rate))


class StepDecaySchedule(LearningRateSchedule):
    """torch's StepLR: base * gamma ** (t // step_size)."""
    _kind = _n.SHARDOPT_LR_STEP_DECAY

    def __init__(self, step_size=None, gamma=None, per_step=False):
        super().__init__(per_step, step_size=("decay_period", step_size), gamma=("gamma", gamma))


class WarmupSchedule(LearningRateSchedule):
    """Linear warm-up, base * (t + 1) / warmup while t < warmup, then base, or `after` of t - warmup (a
    CosineAnnealingSchedule or StepDecaySchedule)."""

    def __init__(self, warmup=None, after=None, per_step=False):
        kinds = {type(None): _n.SHARDOPT_LR_WARMUP, CosineAnnealingSchedule: _n.SHARDOPT_LR_WARMUP_COSINE,
                 StepDecaySchedule: _n.SHARDOPT_LR_WARMUP_STEP_DECAY}
        if type(after) not in kinds:
            raise TypeError(f"after must be None, a CosineAnnealingSchedule or a StepDecaySchedule, not "
                            f"{type(after).__name__}")
        super().__init__(per_step, kinds[type(after)], warmup=("warmup", warmup))
        self.after = after
        self._fields.update(after._fields if after else {})


class LambdaSchedule(LearningRateSchedule):
    """Any rate: fn(t, base) -> rate (finite, >= 0); an exception it raises fails training on every rank."""
    _kind = _n.SHARDOPT_LR_CUSTOM

    def __init__(self, fn, per_step=False):
        if not callable(fn):
            raise TypeError("fn must be callable: fn(t, base) -> learning rate")
        super().__init__(per_step)
        self.fn = fn
