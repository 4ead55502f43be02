"""AsyncSGDOptimizer: bounded-staleness asynchronous data parallelism (docs/async_sgd.md)."""
import operator

from . import shardopt_native as _n
from ._settings import set_checked
from .sharding import ShardedOptimizer


class AsyncSGDOptimizer(ShardedOptimizer):
    """AiDotNet's AsyncSGDOptimizer, asynchronous for real: stale synchronous parallel over a sharded parameter
    server. allow_staleness s: no gradient is applied more than s clocks after the version it was computed on; 0 is
    synchronous, DDP's result bit for bit; None: the library's default. Trains through optimize() only."""
    _strategy = _n.SHARDOPT_ASYNC_SGD

    def __init__(self, wrapped_optimizer, sharding_configuration, allow_staleness=None, layout=None, initial=None):
        self._staleness = None if allow_staleness is None else operator.index(allow_staleness)
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial)

    allow_staleness = property(lambda self: self._sharding.async_staleness)

    def _configure(self, s):
        if self._staleness is not None:
            set_checked(s, "async_staleness", self._staleness, "allow_staleness", _n.shardopt_sharding_options_validate)
