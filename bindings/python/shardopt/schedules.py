"""Learning-rate schedules: a callable epoch -> learning rate (epoch counts from 0). Set one as a
sharded optimizer's learning_rate_schedule; optimize() applies it before every epoch (and
apply_learning_rate_schedule(epoch) does by hand in a step-protocol loop). Any callable works."""
import math

__all__ = ["LearningRateSchedule", "ConstantSchedule", "WarmupSchedule", "CosineAnnealingSchedule",
           "StepDecaySchedule", "LambdaSchedule"]


class LearningRateSchedule:
    def __call__(self, epoch):
        raise NotImplementedError


def _positive(name, value):
    value = float(value)
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{name} must be a finite number > 0 (got {value})")
    return value


class ConstantSchedule(LearningRateSchedule):
    def __init__(self, learning_rate):
        self.learning_rate = _positive("learning_rate", learning_rate)

    def __call__(self, epoch):
        return self.learning_rate


class WarmupSchedule(LearningRateSchedule):
    """Linear warm-up from learning_rate / (warmup_epochs + 1) to learning_rate over warmup_epochs
    epochs, then `after` (a schedule, given the epoch counted from the end of the warm-up) or the
    constant learning_rate."""

    def __init__(self, learning_rate, warmup_epochs, after=None):
        self.learning_rate = _positive("learning_rate", learning_rate)
        if int(warmup_epochs) < 0:
            raise ValueError(f"warmup_epochs must be >= 0 (got {warmup_epochs})")
        self.warmup_epochs = int(warmup_epochs)
        self.after = after

    def __call__(self, epoch):
        if epoch < self.warmup_epochs:
            return self.learning_rate * (epoch + 1) / (self.warmup_epochs + 1)
        return self.after(epoch - self.warmup_epochs) if self.after else self.learning_rate


class CosineAnnealingSchedule(LearningRateSchedule):
    """torch's CosineAnnealingLR: from learning_rate down to min_learning_rate over total_epochs."""

    def __init__(self, learning_rate, total_epochs, min_learning_rate=0.0):
        self.learning_rate = _positive("learning_rate", learning_rate)
        if int(total_epochs) < 1:
            raise ValueError(f"total_epochs must be >= 1 (got {total_epochs})")
        self.total_epochs = int(total_epochs)
        self.min_learning_rate = float(min_learning_rate)

    def __call__(self, epoch):
        t = min(epoch, self.total_epochs) / self.total_epochs
        lr = self.min_learning_rate + (self.learning_rate - self.min_learning_rate) * (1 + math.cos(math.pi * t)) / 2
        return max(lr, 1e-300)


class StepDecaySchedule(LearningRateSchedule):
    """torch's StepLR: learning_rate * gamma ** (epoch // step_size)."""

    def __init__(self, learning_rate, step_size, gamma=0.1):
        self.learning_rate = _positive("learning_rate", learning_rate)
        if int(step_size) < 1:
            raise ValueError(f"step_size must be >= 1 (got {step_size})")
        self.step_size = int(step_size)
        self.gamma = _positive("gamma", gamma)

    def __call__(self, epoch):
        return self.learning_rate * self.gamma ** (epoch // self.step_size)


class LambdaSchedule(LearningRateSchedule):
    """Any function epoch -> learning rate."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError("fn must be callable (epoch -> learning rate)")
        self.fn = fn

    def __call__(self, epoch):
        return float(self.fn(epoch))
