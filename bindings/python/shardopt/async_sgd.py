"""AsyncSGDOptimizer: bounded-staleness asynchronous data parallelism (docs/async_sgd.md)."""
import numpy as np

from . import shardopt_native as _n
from .sharding import ShardedOptimizer

__all__ = ["AsyncSGDOptimizer"]


class AsyncSGDOptimizer(ShardedOptimizer):
    """AiDotNet's AsyncSGDOptimizer, asynchronous for real: stale synchronous parallel over a sharded
    parameter server. Each rank owns a shard of the parameters (its master copy and optimizer state)
    and applies every update to it; workers push gradients to the owners and take new versions from
    them without a global barrier.

    allow_staleness s: no gradient is applied more than s clocks after the version it was computed
    on, and no worker runs more than s clocks ahead of the parameters it computes on; a rank slower
    than that is not waited for, its gradients join later updates. s = 0 is synchronous training,
    DDP's result bit for bit. Trains through optimize(); the step protocol (zero_grad ... step)
    raises NotImplementedError. Host memory; compression, clipping, gradient accumulation and LAMB
    on more than one rank are refused."""
    _strategy = _n.SHARDOPT_ASYNC_SGD

    def __init__(self, wrapped_optimizer, sharding_configuration, allow_staleness=0, layout=None, initial=None):
        if isinstance(allow_staleness, bool) or not isinstance(allow_staleness, (int, np.integer)):
            raise TypeError(f"allow_staleness must be an integer, not {type(allow_staleness).__name__}")
        if allow_staleness < 0:
            raise ValueError(f"allow_staleness must be >= 0 (got {allow_staleness})")
        self.allow_staleness = int(allow_staleness)
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial)

    def _configure(self, s):
        s.async_staleness = self.allow_staleness
