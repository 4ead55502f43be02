"""ElasticOptimizer: training that survives losing ranks (docs/elastic.md). AiDotNet's ElasticOptimizer(wrapped,
config, min_workers, max_workers), for real: DDP that checkpoints every `checkpoint_every` steps without stopping
into `checkpoint_dir` (shared by every rank) and, when created, resumes from the latest complete checkpoint there
at whatever world size the job now has. `shardopt-run --elastic --min N --max M --checkpoint-dir D` restarts the
ranks with the survivors when one is lost; optimize() after a resume skips the steps the checkpoint covers."""
from . import shardopt_native as _n
from .sharding import ShardedOptimizer


class ElasticOptimizer(ShardedOptimizer):
    """min_workers/max_workers: the world sizes the job may run at (InvalidStateError outside them, at
    initialization); checkpoint_dir None: $SHARDOPT_CHECKPOINT_DIR; checkpoint_every None: the library's
    ($SHARDOPT_CHECKPOINT_EVERY, else its default)."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, min_workers=1, max_workers=1024,
                 checkpoint_dir=None, checkpoint_every=None, layout=None, initial=None, parameters=None):
        for name, value, least in (("min_workers", min_workers, 1), ("max_workers", max_workers, 1),
                                   ("checkpoint_every", checkpoint_every, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value is not None and value < least:
                raise ValueError(f"{name} must be at least {least} (got {value})")
        if max_workers < min_workers:
            raise ValueError(f"max_workers {max_workers} is below min_workers {min_workers}")
        self.min_workers, self.max_workers, self._every = min_workers, max_workers, checkpoint_every or 0
        self._dir = None if checkpoint_dir is None else str(checkpoint_dir)
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial, parameters)

    def _created(self, handle):
        e = _n.shardopt_elastic_options()
        _n.shardopt_elastic_options_init(e)
        e.min_workers, e.max_workers, e.checkpoint_every = self.min_workers, self.max_workers, self._every
        e.checkpoint_dir = self._dir
        _n.shardopt_optimizer_make_elastic(handle, e)

    def _status(self, field):
        st = _n.shardopt_elastic_status()
        _n.shardopt_optimizer_elastic_status(self._h, st)
        return getattr(st, field)

    checkpoint_dir = property(lambda self: self._status("checkpoint_dir") if self.is_initialized else self._dir,
                              doc="the directory in force (resolved from the environment once initialized)")
    checkpoint_every = property(lambda self: self._status("checkpoint_every") if self.is_initialized else self._every)
    resumed_step = property(lambda self: self._status("resumed_step"), doc="the step loaded at initialization; -1: none")
    last_checkpoint_step = property(lambda self: self._status("last_checkpoint_step"), doc="-1: none")
    checkpoint_pending = property(lambda self: bool(self._status("checkpoint_pending")))
    generation = property(lambda self: self._status("generation"), doc="restarts of the job before this run")
    checkpoints_published = property(lambda self: self._status("checkpoints_published"))

    def checkpoint(self):
        """Collective: a checkpoint now, at a step boundary (the previous one finished first)."""
        _n.shardopt_optimizer_checkpoint_now(self._h)

    def finish_checkpoint(self):
        """Collective: waits for the checkpoint being written and publishes it (call it at the end)."""
        _n.shardopt_optimizer_finish_checkpoint(self._h)
