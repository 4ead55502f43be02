"""ElasticOptimizer: training that survives losing ranks (docs/elastic.md).

AiDotNet's ElasticOptimizer(wrapped, config, min_workers=1, max_workers=1024), for real: data
parallel (DDP) training that checkpoints every `checkpoint_every` steps without stopping (the
state is copied at the step boundary and written by background threads) into `checkpoint_dir`
(a directory every rank shares), and, when it is created, resumes from the latest complete
checkpoint there at whatever world size the job now has, from min_workers to max_workers.
`shardopt-run --elastic --min N --max M --checkpoint-dir D` restarts the ranks with the survivors
when one dies or a host is cut off; each rank builds its ElasticOptimizer as before and goes on
from `step_count`. optimize() after a resume skips the iterations the checkpoint covers.
"""
from . import shardopt_native as _n
from .sharding import ShardedOptimizer


class ElasticOptimizer(ShardedOptimizer):
    """min_workers/max_workers: the world sizes the job may run at (creation fails with
    RuntimeError outside them). checkpoint_dir: None for $SHARDOPT_CHECKPOINT_DIR (set by
    shardopt-run --checkpoint-dir). checkpoint_every: steps between checkpoints, 0 for
    $SHARDOPT_CHECKPOINT_EVERY, else 100."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, min_workers=1, max_workers=1024,
                 checkpoint_dir=None, checkpoint_every=0, layout=None, initial=None, parameters=None):
        self.min_workers = _count("min_workers", min_workers, 1)
        self.max_workers = _count("max_workers", max_workers, 1)
        if self.max_workers < self.min_workers:
            raise ValueError(f"max_workers {max_workers} is below min_workers {min_workers}")
        self._checkpoint_every = _count("checkpoint_every", checkpoint_every, 0)
        if checkpoint_dir is not None and not isinstance(checkpoint_dir, str):
            checkpoint_dir = str(checkpoint_dir)  # a pathlib.Path
        self._checkpoint_dir = checkpoint_dir
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial, parameters)

    def _created(self, handle):
        _n.so_make_elastic(handle, self.min_workers, self.max_workers, self._checkpoint_every,
                           self._checkpoint_dir or "")

    def _initialized_status(self):
        st = _n.shardopt_elastic_status()
        _n.so_elastic_status(self._h, st)
        return st

    @property
    def checkpoint_dir(self):
        """The directory in force (after initialization: resolved from the environment if needed)."""
        return _n.so_elastic_dir(self._h) if self.is_initialized else self._checkpoint_dir

    @property
    def checkpoint_every(self):
        """Steps between checkpoints in force (after initialization: resolved from the environment)."""
        return int(self._initialized_status().checkpoint_every) if self.is_initialized else self._checkpoint_every

    @property
    def resumed_step(self):
        """The step count loaded at initialization; -1 when no checkpoint was there."""
        return int(self._initialized_status().resumed_step)

    @property
    def last_checkpoint_step(self):
        """The latest complete checkpoint's step count (published, or loaded); -1 for none."""
        return int(self._initialized_status().last_checkpoint_step)

    @property
    def checkpoint_pending(self):
        return bool(self._initialized_status().checkpoint_pending)

    @property
    def generation(self):
        """Restarts of the job before this run (SHARDOPT_ELASTIC_GENERATION; 0 without a launcher)."""
        return int(self._initialized_status().generation)

    @property
    def checkpoints_published(self):
        return int(self._initialized_status().checkpoints_published)

    def checkpoint(self):
        """Collective: a checkpoint now, at a step boundary (the previous one finished first)."""
        _n.so_checkpoint_now(self._h)

    def finish_checkpoint(self):
        """Collective: waits for the checkpoint being written and publishes it (call it at the end)."""
        _n.so_finish_checkpoint(self._h)


def _count(name, value, least):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be at least {least} (got {value})")
    return value
